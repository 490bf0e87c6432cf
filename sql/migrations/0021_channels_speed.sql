-- Cancelling a channel.link job. Its steps are separate Graphile jobs that
-- fence every write by the job's status and attempt count, and between them
-- the job only waits for the binding: so a cancel ends it at once, running or
-- queued, instead of leaving it 'cancelling' for a handler that never hears
-- of it. The pending link ends in the same statement: the channel goes back
-- to the state it had before the link (not_linked for a first link) and the
-- link code stops working.
create function channel_link_job_cancel() returns trigger language plpgsql as $$
begin
  new.status := 'cancelled';
  new.finished_at := coalesce(new.finished_at, now());
  update channel_links set state = coalesce(link_prev_state, 'not_linked'), link_code_hash = null, link_awaiting = false,
    secrets = secrets - 'oauthCode', updated_at = now()
  where link_job_id = new.id and state = 'linking';
  return new;
end;
$$;
create trigger jobs_channel_link_cancel before update of status on jobs
  for each row when (new.kind = 'channel.link' and new.status in ('cancelling', 'cancelled') and old.status in ('queued', 'running'))
  execute function channel_link_job_cancel();
