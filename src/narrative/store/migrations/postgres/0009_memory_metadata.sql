-- Metadata on memories: a JSON object the caller gives (at most 64 keys, 16 KiB as JSON; checked before it is
-- stored), filtered on by search and lists (docs/http.md, Filters).  Memories made from a turn carry the turn's
-- own meta.  Stored as text, like every JSON column, so both stores export the same bytes; filters read it as
-- jsonb.  Existing memories get an empty object.
ALTER TABLE memories ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
