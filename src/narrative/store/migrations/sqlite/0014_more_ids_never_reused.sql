-- Migration 0013 for the other ids a caller keeps and passes back: a use (get_use, explain,
-- learn_from_outcome), a binding (update, complete, delete), an API key (revoke), an entity (resolve_thread)
-- and a narrative link (walk_back, walk_forward).  SQLite gave a deleted newest row's id to the next row, so
-- revoking key 3 and then revoking "3" again revoked the new key; PostgreSQL's identity sequences never did.
CREATE TRIGGER uses_id_floor AFTER DELETE ON uses BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('uses', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER storyline_bindings_id_floor AFTER DELETE ON storyline_bindings BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('storyline_bindings', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER api_keys_id_floor AFTER DELETE ON api_keys BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('api_keys', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER entities_id_floor AFTER DELETE ON entities BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('entities', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;

CREATE TRIGGER narratives_id_floor AFTER DELETE ON narratives BEGIN
    INSERT INTO id_floors(name, last_id) VALUES ('narratives', old.id)
    ON CONFLICT(name) DO UPDATE SET last_id = MAX(last_id, excluded.last_id);
END;
