-- A log of changes to memory texts, so in-process indexes (the keyword index)
-- catch up with writes made by this or any other connection by reading only
-- what is new: every row is "memory N changed; read it again".
CREATE TABLE memory_changes (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id  INTEGER NOT NULL
);
CREATE TRIGGER memory_changes_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
CREATE TRIGGER memory_changes_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (old.id);
END;
CREATE TRIGGER memory_changes_au AFTER UPDATE OF content, key_points, user_id ON memories BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
