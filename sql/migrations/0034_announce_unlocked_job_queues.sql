-- A job of a named queue (a chat session's turns run in one) waits while
-- another job of its queue runs. Graphile Worker skips a locked queue when it
-- fetches jobs, and says nothing when the queue unlocks (its job completed,
-- failed, or was let go by a dead worker's recovery): a turn sent while its
-- session's last turn was running waited for the next poll, up to
-- WORKER_POLL_INTERVAL_MS (2 s by default) on an otherwise quiet worker.
--
-- This trigger announces an unlock on the channel Graphile Worker listens on
-- for new jobs, so every worker fetches again at once. The payload names the
-- queue: PostgreSQL sends one notification per distinct payload per commit,
-- so a completion batch that unlocks five queues wakes five workers, and a
-- queue unlocked twice in one commit is announced once. Graphile only reads
-- the count. A trigger on Graphile's table, not a change to its functions;
-- test/workers/queue-wakeup.test.ts proves the wake-up.
create function announce_unlocked_job_queue() returns trigger
language plpgsql as $$
begin
  perform pg_notify('jobs:insert', json_build_object('count', 1, 'queue', new.id)::text);
  return null;
end;
$$;

create trigger announce_unlock
  after update of locked_at on graphile_worker._private_job_queues
  for each row
  when (old.locked_at is not null and new.locked_at is null)
  execute function announce_unlocked_job_queue();
