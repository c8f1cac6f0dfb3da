-- Vector search reads only the asking user's rows: no HNSW index over every user's vectors (memories' or
-- passages') any more.
-- A user with few vectors is searched exactly through the primary key (user_id, memory_id); a user
-- with many gets an HNSW index of their own, a partial index made by the store when it first needs it
-- (see store/postgres/vectors.py).  The shared index made every insert pay for an HNSW update and
-- every filtered search walk other users' vectors.
DROP INDEX IF EXISTS memory_vectors_hnsw_384;
DROP INDEX IF EXISTS passage_vectors_hnsw_384;  -- passages are searched the same way
