-- The write path reads a conversation's exchanges newest first on every turn
-- (retention windows, the reflection count): one index holds the whole filter
-- (user, conversation, stream) and the order, so a turn reads a few index
-- entries instead of sorting the conversation.  It also serves everything the
-- single-column conversation index did.
CREATE INDEX memories_conversation_stream
    ON memories(conversation_id, user_id, stream, COALESCE(event_at, created_at), id);
DROP INDEX memories_conversation;

-- Routing searches the storyline index on every turn, right after the turn
-- before rewrote a storyline's summary and keywords: each turn leaves a new
-- small segment, and a query reads every segment.  The index is tiny (a row
-- per storyline), so merging as soon as two segments share a level keeps
-- routing's lookups ~7x fewer for almost no write cost.  Scores do not change.
INSERT INTO storylines_fts(storylines_fts, rank) VALUES ('crisismerge', 2);
