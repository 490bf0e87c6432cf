// diag.noop: does nothing and succeeds. Used by the bench and by operators to
// check that api, database and workers are connected.
import { z } from 'zod';
import { defineTask } from '../define-task.ts';

export default defineTask('diag.noop', z.object({}).loose(), async () => ({ ok: true }));
