-- Facts about the database itself, not about any user: one value per key.  `narrative demo` sets
-- `demo` here, so a later demo run can tell a file it made (which it may replace) from anyone
-- else's (which it never touches).  Export and import leave it alone: it holds no user data.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
