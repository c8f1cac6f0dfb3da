-- Storyline bindings (NarraNexus): named instances an agent binds to a storyline (a tool set, a job, a goal,
-- any module instance) with a status and a JSON payload.  They live and die with their storyline (and user);
-- a binding whose status is final has completed_at set: it is history.  touched_at is the last time anything
-- moved it (an update, a message that named it, a model's judgement), touched_by says what.
CREATE TABLE storyline_bindings (
    id            INTEGER PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    storyline_id  INTEGER NOT NULL REFERENCES storylines(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL CHECK (kind IN ('toolset', 'job', 'goal', 'module')),
    name          TEXT NOT NULL,
    status        TEXT NOT NULL,
    payload       TEXT NOT NULL DEFAULT '{}',
    touched_at    TEXT NOT NULL,
    touched_by    TEXT NOT NULL DEFAULT '',
    completed_at  TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX storyline_bindings_storyline ON storyline_bindings(storyline_id, completed_at);
CREATE INDEX storyline_bindings_user_kind ON storyline_bindings(user_id, kind, completed_at);

-- Links between two memories (ITSERR): research items about the same work, author or idea (consolidation:
-- linked, never merged), and a decision that builds on or reverses an earlier one (decision chains).
-- memory_id is the later item, linked_id the earlier; reason says which rule (or model, or person) made it.
CREATE TABLE memory_links (
    memory_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    linked_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('same_work', 'same_author', 'same_idea', 'builds_on', 'reverses')),
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    origin      TEXT NOT NULL CHECK (origin IN ('rule', 'llm', 'user')),
    score       REAL NOT NULL DEFAULT 0,
    reason      TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    PRIMARY KEY (memory_id, linked_id, kind),
    CHECK (memory_id != linked_id)
);
CREATE INDEX memory_links_linked ON memory_links(linked_id);
CREATE INDEX memory_links_user ON memory_links(user_id, kind);

-- Answers to the decision audit (ITSERR "periodic decision audit prompts"): a decision kept restarts its
-- audit clock; a decision reversed is never offered again.
CREATE TABLE decision_reviews (
    id          INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    outcome     TEXT NOT NULL CHECK (outcome IN ('kept', 'reversed')),
    note        TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);
CREATE INDEX decision_reviews_memory ON decision_reviews(memory_id);
