-- A process keeps each searched user's memory briefs (stream, time, sources, end of validity) beside its keyword
-- index, current from the change log: a search read its 100-200 candidates' briefs from the server every time.
-- So the log also takes a memory whose brief changed (its stream, time or validity: a correction supersedes it)
-- and a memory whose sources changed (a message deleted from under it).  An update that changes none of the
-- columns a process holds is not logged.
DROP TRIGGER memory_changes_au ON memories;
CREATE TRIGGER memory_changes_au AFTER UPDATE OF content, key_points, user_id, stream, event_at, created_at, valid_to
ON memories FOR EACH ROW WHEN (
    OLD.content IS DISTINCT FROM NEW.content
    OR OLD.key_points IS DISTINCT FROM NEW.key_points
    OR OLD.user_id IS DISTINCT FROM NEW.user_id
    OR OLD.stream IS DISTINCT FROM NEW.stream
    OR OLD.event_at IS DISTINCT FROM NEW.event_at
    OR OLD.created_at IS DISTINCT FROM NEW.created_at
    OR OLD.valid_to IS DISTINCT FROM NEW.valid_to
) EXECUTE FUNCTION memory_changed();

-- passage_changed() logs the row's memory_id: memory_sources rows have one too
CREATE TRIGGER memory_changes_source_ai AFTER INSERT ON memory_sources FOR EACH ROW EXECUTE FUNCTION passage_changed();
CREATE TRIGGER memory_changes_source_ad AFTER DELETE ON memory_sources FOR EACH ROW EXECUTE FUNCTION passage_changed();
CREATE TRIGGER memory_changes_source_au AFTER UPDATE ON memory_sources FOR EACH ROW EXECUTE FUNCTION passage_changed();

-- A memory now logs about twice (its row and its source), so the log keeps twice as many entries: a reader that
-- fell further behind than the log reaches rebuilds its index and briefs from the tables (about a second for
-- 100,000 memories), and it should take as many memories written by others as before to get there.
CREATE OR REPLACE FUNCTION memory_changes_self_prune() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM prune_memory_changes(10000);
    RETURN NULL;
END;
$$;

-- A conflict made or removed changes what a search shows of both memories it names: both are logged.
CREATE FUNCTION conflict_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO memory_changes(memory_id) VALUES (OLD.memory_id), (OLD.other_memory_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memory_changes(memory_id) VALUES (NEW.memory_id), (NEW.other_memory_id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER memory_changes_conflict AFTER INSERT OR UPDATE OR DELETE ON conflicts
FOR EACH ROW EXECUTE FUNCTION conflict_changed();

-- A search reads the user's speaker names (every storyline's participants) before it embeds the query; a process
-- holds them too.  A storyline made, removed or given other participants is logged under minus its id (no memory
-- has a negative id): a reader that sees one reads the names again.
CREATE FUNCTION storyline_participants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes(memory_id) VALUES (-OLD.id);
    ELSE
        INSERT INTO memory_changes(memory_id) VALUES (-NEW.id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER memory_changes_storyline_aid AFTER INSERT OR DELETE ON storylines
FOR EACH ROW EXECUTE FUNCTION storyline_participants_changed();
CREATE TRIGGER memory_changes_storyline_au AFTER UPDATE OF participants, user_id ON storylines FOR EACH ROW
WHEN (OLD.participants IS DISTINCT FROM NEW.participants OR OLD.user_id IS DISTINCT FROM NEW.user_id)
EXECUTE FUNCTION storyline_participants_changed();
