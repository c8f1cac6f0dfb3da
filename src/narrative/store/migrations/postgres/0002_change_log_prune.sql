-- The change log stays short by itself, and a reader can tell when entries it still needed were pruned.
--
-- memory_changes_pruned holds the highest sequence number and the highest writing transaction id
-- (xid8 as bigint) of every entry ever pruned.  A reader that caught up to sequence S with snapshot
-- xmin X has read every entry it will ever need except those with seq > S or xid >= X; if a prune
-- took any such entry, the reader rebuilds its index from the memories table instead (nothing is
-- lost, whatever the commit order).  No row means nothing was pruned yet.  Like memory_changes,
-- it holds no user data.
CREATE TABLE memory_changes_pruned (
    singleton  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    seq        BIGINT NOT NULL DEFAULT 0,
    xid        BIGINT NOT NULL DEFAULT 0
);

-- Drop all but the newest `keep` entries; returns how many went.  One pruner at a time, and nobody
-- waits for it: while another transaction holds the prune lock, this call prunes nothing (the
-- prune record's row lock, held to commit, could otherwise join a deadlock with a writer's locks).
CREATE FUNCTION prune_memory_changes(keep BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    gone_count BIGINT;
    gone_seq   BIGINT;
    gone_xid   BIGINT;
BEGIN
    IF NOT pg_try_advisory_xact_lock(7246162) THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM memory_changes
        WHERE seq <= (SELECT MAX(seq) FROM memory_changes) - keep
        RETURNING seq, xid::text::bigint AS xid
    )
    SELECT COUNT(*), MAX(seq), MAX(xid) INTO gone_count, gone_seq, gone_xid FROM gone;
    IF gone_count > 0 THEN
        INSERT INTO memory_changes_pruned AS p(singleton, seq, xid) VALUES (TRUE, gone_seq, gone_xid)
        ON CONFLICT (singleton) DO UPDATE
        SET seq = GREATEST(p.seq, EXCLUDED.seq), xid = GREATEST(p.xid, EXCLUDED.xid);
    END IF;
    RETURN gone_count;
END;
$$;

-- Every 1,000th entry drops all but the newest 5,000 (as the SQLite file's log does).
CREATE FUNCTION memory_changes_self_prune() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM prune_memory_changes(5000);
    RETURN NULL;
END;
$$;
CREATE TRIGGER memory_changes_prune AFTER INSERT ON memory_changes
FOR EACH ROW WHEN (NEW.seq % 1000 = 0) EXECUTE FUNCTION memory_changes_self_prune();
