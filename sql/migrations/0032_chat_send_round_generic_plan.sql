-- plpgsql plans a statement afresh for its first five runs on a connection
-- before it settles on the cached generic plan; for chat_send_round's
-- statement each such planning cost about 2 ms, paid five times on each
-- pooled connection. Its plan does not depend on the arguments (every lookup
-- is an index probe per send), so it takes the generic plan from the start.
alter function chat_send_round(jsonb, json, jsonb, text, jsonb, integer, text[], text, boolean)
  set plan_cache_mode = force_generic_plan;
