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
