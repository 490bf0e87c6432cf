// Graphile Worker's open jobs with their payloads. Its public view
// (graphile_worker.jobs) leaves the payload out; the console needs it to
// tell whose job it is (tenantId) and which platform job it runs (jobId).
import { sql } from '../db/pool.ts';

export const GRAPHILE_JOBS = sql.fragment`(
  select j.id, t.identifier as task_identifier, j.run_at, j.attempts, j.max_attempts, j.last_error,
    j.locked_at, j.locked_by, j.payload
  from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id)`;
