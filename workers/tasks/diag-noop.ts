// diag.noop: does nothing and succeeds. Used by the bench and by operators to
// check that api, database and workers are connected.
import { DiagInputs } from '../../core/jobs/diagnostics.ts';
import { defineTask } from '../define-task.ts';

export default defineTask('diag.noop', DiagInputs['diag.noop'], async () => ({ ok: true }));
