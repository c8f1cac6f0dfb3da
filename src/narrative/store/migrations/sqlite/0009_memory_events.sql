-- History: every change to a memory is an event (created, edited, confirmed, superseded, restored,
-- deleted), appended and never rewritten, except by a delete: a deleted memory's events lose their
-- texts and details, so the file keeps no deleted text; kinds and times stay as its tombstone.
-- memory_id is deliberately not a foreign key: the events outlive the memory.  They go with the user.
CREATE TABLE memory_events (
    id          INTEGER PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    memory_id   INTEGER NOT NULL,
    kind        TEXT NOT NULL
                CHECK (kind IN ('created', 'edited', 'confirmed', 'superseded', 'restored', 'deleted')),
    old_text    TEXT NOT NULL DEFAULT '',
    new_text    TEXT NOT NULL DEFAULT '',
    detail      TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL
);
-- A memory's history in order; also the highest memory id any event names (a new memory's id
-- is above it, so an id is never given again after its memory was deleted).
CREATE INDEX memory_events_memory ON memory_events(memory_id, id);

-- The memories stored before there was a history: each gets what the file still tells, timed as it
-- was stored: its first text, the review that confirmed it (with the proposal the review changed),
-- an edit by hand that changed it.
INSERT INTO memory_events(user_id, memory_id, kind, new_text, detail, created_at)
SELECT user_id, id, 'created', CASE WHEN user_reviewed = 1 THEN content ELSE COALESCE(original_content, content) END,
       '{"from": "before history"}', created_at
FROM memories ORDER BY id;
INSERT INTO memory_events(user_id, memory_id, kind, old_text, new_text, detail, created_at)
SELECT user_id, id, 'confirmed', CASE WHEN original_content != content THEN original_content ELSE '' END, content,
       '{"from": "before history"}', created_at
FROM memories WHERE user_reviewed = 1 ORDER BY id;
INSERT INTO memory_events(user_id, memory_id, kind, old_text, new_text, detail, created_at)
SELECT user_id, id, 'edited', original_content, content, '{"from": "before history"}', created_at
FROM memories WHERE user_reviewed = 0 AND original_content IS NOT NULL AND original_content != content ORDER BY id;
