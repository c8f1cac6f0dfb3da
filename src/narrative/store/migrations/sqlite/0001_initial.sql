-- narrative: the whole glossary in one SQLite file.
-- Every row belongs to exactly one user; every read filters by user_id.

CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL
);

CREATE TABLE storylines (
    id                INTEGER PRIMARY KEY,
    user_id           TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('your_story', 'default', 'user', 'detected')),
    status            TEXT NOT NULL CHECK (status IN ('permanent', 'active', 'archived')),
    description       TEXT NOT NULL DEFAULT '',
    keywords          TEXT NOT NULL DEFAULT '[]',
    summary           TEXT NOT NULL DEFAULT '',
    interaction_count INTEGER NOT NULL DEFAULT 0,
    participants      TEXT NOT NULL DEFAULT '[]',
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    last_message_at   TEXT,
    UNIQUE (user_id, name)
);
CREATE UNIQUE INDEX one_your_story_per_user ON storylines(user_id) WHERE kind = 'your_story';

CREATE TABLE conversations (
    id                      INTEGER PRIMARY KEY,
    user_id                 TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    status                  TEXT NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'ready_to_close', 'compressing', 'archived')),
    title                   TEXT NOT NULL DEFAULT '',
    started_at              TEXT NOT NULL,
    last_message_at         TEXT,
    closed_at               TEXT,
    archived_at             TEXT,
    message_count           INTEGER NOT NULL DEFAULT 0,
    is_paused               INTEGER NOT NULL DEFAULT 0,
    paused_at               TEXT,
    idle_notified_at        TEXT,
    compression_model       TEXT,
    compression_duration_ms INTEGER,
    compression_passes      INTEGER,
    preview                 TEXT
);
-- Talking Rock's singleton rule, enforced by the database itself.
CREATE UNIQUE INDEX one_active_conversation_per_user ON conversations(user_id) WHERE status = 'active';
CREATE INDEX conversations_user_status ON conversations(user_id, status);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position         INTEGER NOT NULL,
    role             TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    speaker          TEXT NOT NULL DEFAULT '',
    content          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    storyline_id     INTEGER REFERENCES storylines(id) ON DELETE SET NULL,
    meta             TEXT NOT NULL DEFAULT '{}',
    UNIQUE (user_id, position)
);
CREATE INDEX messages_conversation ON messages(conversation_id, position);
CREATE INDEX messages_storyline ON messages(storyline_id, position);

CREATE TABLE narratives (
    id                     INTEGER PRIMARY KEY,
    user_id                TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    summary                TEXT NOT NULL,
    memory_ids             TEXT NOT NULL DEFAULT '[]',
    previous_narrative_id  INTEGER REFERENCES narratives(id) ON DELETE SET NULL,
    topic                  TEXT NOT NULL DEFAULT '',
    storyline_id           INTEGER REFERENCES storylines(id) ON DELETE SET NULL,
    conversation_id        INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
    sealed                 INTEGER NOT NULL DEFAULT 0,
    sealed_at              TEXT,
    created_at             TEXT NOT NULL
);
CREATE INDEX narratives_previous ON narratives(previous_narrative_id);
CREATE INDEX narratives_user_created ON narratives(user_id, created_at);
-- Koshi: sealed narratives are immutable facts about what happened.  Only the
-- link columns that deletes maintain (ON DELETE SET NULL) may still change.
CREATE TRIGGER narratives_sealed_immutable
BEFORE UPDATE OF summary, memory_ids, topic, sealed, user_id ON narratives
WHEN OLD.sealed = 1
BEGIN
    SELECT RAISE(ABORT, 'narrative is sealed');
END;

CREATE TABLE memories (
    id                    INTEGER PRIMARY KEY,
    user_id               TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    stream                TEXT NOT NULL
                          CHECK (stream IN ('conversation', 'research', 'decision', 'reflection', 'narrative', 'fact')),
    source                TEXT NOT NULL
                          CHECK (source IN ('conversation', 'agent', 'extraction', 'narrative', 'reflection')),
    content               TEXT NOT NULL,
    importance            INTEGER NOT NULL DEFAULT 2 CHECK (importance BETWEEN 1 AND 5),
    emotions              TEXT NOT NULL DEFAULT '[]',
    conversation_id       INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
    storyline_id          INTEGER REFERENCES storylines(id) ON DELETE SET NULL,
    narrative_id          INTEGER REFERENCES narratives(id) ON DELETE SET NULL,
    details               TEXT,
    retention             TEXT NOT NULL DEFAULT 'full' CHECK (retention IN ('full', 'key_points', 'theme')),
    key_points            TEXT NOT NULL DEFAULT '',
    user_reviewed         INTEGER NOT NULL DEFAULT 0,
    user_edited           INTEGER NOT NULL DEFAULT 0,
    original_content      TEXT,
    extraction_model      TEXT,
    extraction_confidence REAL,
    event_at              TEXT,
    created_at            TEXT NOT NULL
);
CREATE INDEX memories_user_created ON memories(user_id, created_at);
CREATE INDEX memories_conversation ON memories(conversation_id);
CREATE INDEX memories_storyline ON memories(storyline_id);
CREATE INDEX memories_narrative ON memories(narrative_id);

-- Provenance: every memory knows the messages it came from.
CREATE TABLE memory_sources (
    memory_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    message_id  INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, message_id)
);
CREATE INDEX memory_sources_message ON memory_sources(message_id);

-- Vectors are the source of truth for the in-process index; model:dims travels with each.
CREATE TABLE memory_vectors (
    memory_id  INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    model      TEXT NOT NULL,
    vector     BLOB NOT NULL
);
CREATE INDEX memory_vectors_user ON memory_vectors(user_id);

CREATE TABLE storyline_vectors (
    storyline_id  INTEGER PRIMARY KEY REFERENCES storylines(id) ON DELETE CASCADE,
    user_id       TEXT NOT NULL,
    model         TEXT NOT NULL,
    vector        BLOB NOT NULL
);

CREATE TABLE entities (
    id                     INTEGER PRIMARY KEY,
    user_id                TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    entity_type            TEXT NOT NULL CHECK (entity_type IN (
                               'person', 'task', 'decision', 'waiting_on', 'question_opened',
                               'question_resolved', 'blocker_cleared', 'priority_change',
                               'storyline_reference', 'insight')),
    name                   TEXT NOT NULL,
    data                   TEXT NOT NULL DEFAULT '{}',
    memory_id              INTEGER REFERENCES memories(id) ON DELETE CASCADE,
    conversation_id        INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
    storyline_id           INTEGER REFERENCES storylines(id) ON DELETE SET NULL,
    is_active              INTEGER NOT NULL DEFAULT 1,
    resolved_by_memory_id  INTEGER REFERENCES memories(id) ON DELETE SET NULL,
    resolved_by_entity_id  INTEGER REFERENCES entities(id) ON DELETE SET NULL,
    resolved_at            TEXT,
    created_at             TEXT NOT NULL
);
CREATE INDEX entities_user_type ON entities(user_id, entity_type, is_active);
CREATE INDEX entities_memory ON entities(memory_id);

CREATE TABLE state_deltas (
    id               INTEGER PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    delta_type       TEXT NOT NULL CHECK (delta_type IN (
                         'new_waiting_on', 'resolved_waiting_on', 'new_thread',
                         'resolved_thread', 'priority_change', 'storyline_update')),
    data             TEXT NOT NULL DEFAULT '{}',
    memory_id        INTEGER REFERENCES memories(id) ON DELETE CASCADE,
    conversation_id  INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
    applied          INTEGER NOT NULL DEFAULT 0,
    applied_at       TEXT,
    created_at       TEXT NOT NULL
);
CREATE INDEX state_deltas_memory ON state_deltas(memory_id);

-- Uses: which memories shaped a recall, a context or a classification, and why.
CREATE TABLE uses (
    id               INTEGER PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN (
                         'recall', 'context', 'classification', 'decomposition', 'verification', 'outcome')),
    query            TEXT NOT NULL DEFAULT '',
    conversation_id  INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
    outcome          TEXT,
    meta             TEXT NOT NULL DEFAULT '{}',
    created_at       TEXT NOT NULL
);
CREATE INDEX uses_user_created ON uses(user_id, created_at);

CREATE TABLE use_references (
    use_id          INTEGER NOT NULL REFERENCES uses(id) ON DELETE CASCADE,
    memory_id       INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    influence_type  TEXT NOT NULL CHECK (influence_type IN (
                        'disambiguation', 'pattern_match', 'entity_reference',
                        'intent_verification', 'retrieval')),
    score           REAL NOT NULL DEFAULT 0,
    reasoning       TEXT NOT NULL DEFAULT '',
    rank            INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (use_id, memory_id)
);
CREATE INDEX use_references_memory ON use_references(memory_id);

CREATE TABLE routing_decisions (
    id            INTEGER PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    message_id    INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    storyline_id  INTEGER NOT NULL REFERENCES storylines(id) ON DELETE CASCADE,
    decision      TEXT NOT NULL CHECK (decision IN ('continue', 'switch', 'create', 'default')),
    scores        TEXT NOT NULL DEFAULT '{}',
    created_at    TEXT NOT NULL
);
CREATE INDEX routing_decisions_message ON routing_decisions(message_id);

CREATE TABLE api_keys (
    id          INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    key_hash    TEXT NOT NULL UNIQUE,
    label       TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);

-- Keyword search (BM25) over memories, narratives and messages.
CREATE VIRTUAL TABLE memories_fts USING fts5(content, key_points, content='memories', content_rowid='id',
                                             tokenize='porter unicode61');
CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, content, key_points) VALUES (new.id, new.content, new.key_points);
END;
CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, key_points)
    VALUES ('delete', old.id, old.content, old.key_points);
END;
CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, key_points ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content, key_points)
    VALUES ('delete', old.id, old.content, old.key_points);
    INSERT INTO memories_fts(rowid, content, key_points) VALUES (new.id, new.content, new.key_points);
END;

CREATE VIRTUAL TABLE narratives_fts USING fts5(summary, topic, content='narratives', content_rowid='id',
                                               tokenize='porter unicode61');
CREATE TRIGGER narratives_fts_ai AFTER INSERT ON narratives BEGIN
    INSERT INTO narratives_fts(rowid, summary, topic) VALUES (new.id, new.summary, new.topic);
END;
CREATE TRIGGER narratives_fts_ad AFTER DELETE ON narratives BEGIN
    INSERT INTO narratives_fts(narratives_fts, rowid, summary, topic) VALUES ('delete', old.id, old.summary, old.topic);
END;
CREATE TRIGGER narratives_fts_au AFTER UPDATE OF summary, topic ON narratives BEGIN
    INSERT INTO narratives_fts(narratives_fts, rowid, summary, topic) VALUES ('delete', old.id, old.summary, old.topic);
    INSERT INTO narratives_fts(rowid, summary, topic) VALUES (new.id, new.summary, new.topic);
END;

CREATE VIRTUAL TABLE messages_fts USING fts5(content, speaker, content='messages', content_rowid='id',
                                             tokenize='porter unicode61');
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, speaker) VALUES (new.id, new.content, new.speaker);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, speaker) VALUES ('delete', old.id, old.content, old.speaker);
END;
CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, speaker ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, speaker) VALUES ('delete', old.id, old.content, old.speaker);
    INSERT INTO messages_fts(rowid, content, speaker) VALUES (new.id, new.content, new.speaker);
END;

CREATE VIRTUAL TABLE storylines_fts USING fts5(name, description, keywords, summary, content='storylines',
                                               content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER storylines_fts_ai AFTER INSERT ON storylines BEGIN
    INSERT INTO storylines_fts(rowid, name, description, keywords, summary)
    VALUES (new.id, new.name, new.description, new.keywords, new.summary);
END;
CREATE TRIGGER storylines_fts_ad AFTER DELETE ON storylines BEGIN
    INSERT INTO storylines_fts(storylines_fts, rowid, name, description, keywords, summary)
    VALUES ('delete', old.id, old.name, old.description, old.keywords, old.summary);
END;
CREATE TRIGGER storylines_fts_au AFTER UPDATE OF name, description, keywords, summary ON storylines BEGIN
    INSERT INTO storylines_fts(storylines_fts, rowid, name, description, keywords, summary)
    VALUES ('delete', old.id, old.name, old.description, old.keywords, old.summary);
    INSERT INTO storylines_fts(rowid, name, description, keywords, summary)
    VALUES (new.id, new.name, new.description, new.keywords, new.summary);
END;
