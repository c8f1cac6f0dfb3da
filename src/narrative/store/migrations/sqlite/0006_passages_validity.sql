-- Passages: the searchable units of a message.  A message the embedding model reads whole is one passage; a
-- longer one (a long reply, a pasted document) is several, each a character span of the message (the text is
-- never copied).  A passage belongs to the memory made when its message was processed (the message's own
-- conversation memory): filters, deletes and the change log go through that memory.
CREATE TABLE passages (
    id             INTEGER PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    message_id     INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    memory_id      INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,
    parts          INTEGER NOT NULL DEFAULT 1,
    char_start     INTEGER NOT NULL,
    char_end       INTEGER NOT NULL,
    valid_to       TEXT,
    superseded_by  INTEGER REFERENCES passages(id) ON DELETE SET NULL,
    UNIQUE (message_id, seq)
);
CREATE INDEX passages_memory ON passages(memory_id);
CREATE INDEX passages_user ON passages(user_id, message_id);
CREATE INDEX passages_superseded_by ON passages(superseded_by);

CREATE TABLE passage_vectors (
    passage_id  INTEGER PRIMARY KEY REFERENCES passages(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    model       TEXT NOT NULL,
    vector      BLOB NOT NULL
);
CREATE INDEX passage_vectors_user ON passage_vectors(user_id);

-- Passages and their vectors join the memory change log under their memory's id: an in-process index that
-- re-reads a changed memory re-reads its passages too.
CREATE TRIGGER memory_changes_passage_ai AFTER INSERT ON passages BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.memory_id);
END;
CREATE TRIGGER memory_changes_passage_ad AFTER DELETE ON passages BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (old.memory_id);
END;
CREATE TRIGGER memory_changes_passage_vector_ai AFTER INSERT ON passage_vectors BEGIN
    INSERT INTO memory_changes(memory_id) SELECT memory_id FROM passages WHERE id = new.passage_id;
END;
CREATE TRIGGER memory_changes_passage_vector_ad AFTER DELETE ON passage_vectors BEGIN
    INSERT INTO memory_changes(memory_id) SELECT memory_id FROM passages WHERE id = old.passage_id;
END;
CREATE TRIGGER memory_changes_passage_vector_au AFTER UPDATE ON passage_vectors BEGIN
    INSERT INTO memory_changes(memory_id) SELECT memory_id FROM passages WHERE id = new.passage_id;
END;

-- Knowledge over time: a memory is current until something supersedes it (valid_to, superseded_by); nothing is
-- deleted.  Two current statements that disagree with no update order between them are linked as conflicting.
ALTER TABLE memories ADD COLUMN valid_to TEXT;
ALTER TABLE memories ADD COLUMN superseded_by INTEGER REFERENCES memories(id) ON DELETE SET NULL;
CREATE INDEX memories_superseded_by ON memories(superseded_by);

CREATE TABLE conflicts (
    id                 INTEGER PRIMARY KEY,
    user_id            TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id          INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    other_memory_id    INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    passage_id         INTEGER REFERENCES passages(id) ON DELETE CASCADE,
    other_passage_id   INTEGER REFERENCES passages(id) ON DELETE CASCADE,
    reason             TEXT NOT NULL DEFAULT '',
    created_at         TEXT NOT NULL,
    UNIQUE (memory_id, other_memory_id, passage_id, other_passage_id)
);
CREATE INDEX conflicts_memory ON conflicts(memory_id);
CREATE INDEX conflicts_other ON conflicts(other_memory_id);
