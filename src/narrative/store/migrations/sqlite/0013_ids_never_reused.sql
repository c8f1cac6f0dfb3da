-- A deleted conversation's, message's or storyline's id is never given again: an agent that kept "conversation 3"
-- must not find another conversation there.  SQLite gives MAX(id) + 1, so deleting the newest row handed its id to
-- the next one.  Each delete records the highest id the table has lost; a new row's id is above it and above
-- every id there is (``next_id``).  A rebuild of the tables with AUTOINCREMENT was not chosen: dropping a table that
-- others point at, inside the migration's transaction, runs their ON DELETE actions.  A file upgraded here has
-- no record of what it deleted before: its ids start above those it holds, as before.
CREATE TABLE id_floors (
    name    TEXT PRIMARY KEY,
    last_id INTEGER NOT NULL
);

CREATE TRIGGER conversations_id_floor AFTER DELETE ON conversations BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('conversations', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER messages_id_floor AFTER DELETE ON messages BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('messages', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER storylines_id_floor AFTER DELETE ON storylines BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('storylines', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;
