-- A user's memories newest first, and those of one stream newest first, read by key.  Without these indexes the
-- user's every memory was read and sorted: at a million memories, listing the newest twenty took 219 ms, and
-- finding the decisions a new decision may follow from (or the research items a new one may join) took 157 ms,
-- paid by every turn that made one.  Each is now a walk down an index (under 0.1 ms).
CREATE INDEX memories_user_time ON memories(user_id, COALESCE(event_at, created_at), id);
CREATE INDEX memories_user_stream ON memories(user_id, stream, COALESCE(event_at, created_at), id);
