-- Workers write 'running' lazily (core/jobs/lifecycle.ts): a job whose
-- attempt has started may still read 'queued', and a cancel then makes it
-- 'cancelled' at once. Its worker must hear of that too, to abort the
-- handler, so job_cancel is also sent when a queued job is cancelled (nobody
-- holds most such jobs; the NOTIFY is then simply unheard).
drop trigger jobs_cancel_notify on jobs;
create trigger jobs_cancel_notify after update of status on jobs
  for each row when ((new.status = 'cancelling' and old.status is distinct from 'cancelling')
    or (new.status = 'cancelled' and old.status = 'queued'))
  execute function jobs_cancel_notify();

-- The fencing rule of every write an attempt makes (core/jobs/lifecycle.ts),
-- in one place: attempt n may write while no later attempt has written and
-- the job is not final. Its own earlier writes left it 'running' with
-- attempts = n; an attempt that has not written yet finds 'queued' (or a lost
-- attempt's 'running') with a smaller number. A plain SQL expression, so the
-- planner inlines it.
create function job_attempt_may_write(job_status text, job_attempts integer, attempt integer) returns boolean
  language sql immutable parallel safe as $$
    select (job_attempts < attempt and job_status in ('queued', 'running')) or (job_attempts = attempt and job_status = 'running')
  $$;
