// GET /api/jobs/:jobId and POST /api/jobs/:jobId/cancel.
import t from 'tap';
import { z } from 'zod';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember, enqueue } from '../../../helpers/fixtures.ts';
import { startTestWorker } from '../../../helpers/worker.ts';
import { waitFor } from '../../../helpers/wait.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const admin = await createMember(db, 'admin');
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

t.test('a queued job is cancelled and a worker then skips it', async (t) => {
  const jobId = await enqueue(db, { kind: 'diag.steps', tenantId: admin.tenantId, input: { steps: 1, delayMs: 0 } });
  const res = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth(admin.token) });
  t.equal(res.statusCode, 200);
  t.match(res.json(), { id: jobId, status: 'cancelled', attempts: 0 });
  t.ok(res.json().finishedAt);

  const again = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth(admin.token) });
  t.equal(again.statusCode, 409);
  t.match(again.json(), { error: 'job_not_cancellable', status: 409, message: /cancelled/ });

  const worker = await startTestWorker(t, databaseUrl);
  // The Graphile job is consumed without running the task.
  await waitFor('the skipped job to leave the queue', async () => {
    const left = await worker.db.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from graphile_worker.jobs where task_identifier = 'diag.steps'`);
    return left === 0;
  });
  const polled = await app.inject({ url: `/api/jobs/${jobId}`, headers: auth(admin.token) });
  t.match(polled.json(), { status: 'cancelled', attempts: 0, result: null });
});

t.test('a viewer may read but not cancel; a stranger sees nothing', async (t) => {
  const viewer = await createMember(db, 'viewer');
  const stranger = await createMember(db, 'admin');
  const jobId = await enqueue(db, { kind: 'diag.noop', tenantId: viewer.tenantId });
  t.equal((await app.inject({ url: `/api/jobs/${jobId}`, headers: auth(viewer.token) })).statusCode, 200);
  const denied = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth(viewer.token) });
  t.equal(denied.statusCode, 403);
  const hidden = await app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth(stranger.token) });
  t.equal(hidden.statusCode, 404, "another tenant's job is not found");
});

t.test('bad tokens and expired tokens get 401', async (t) => {
  const expired = await signPlatformToken({ userId: admin.userId }, Buffer.alloc(32, 7), 'http://localhost:3000', -10);
  const res = await app.inject({ url: `/api/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55`, headers: auth(expired) });
  t.equal(res.statusCode, 401);
  t.match(res.json(), { error: 'unauthorized', message: /expired/ });
  const forged = await signPlatformToken({ userId: admin.userId }, Buffer.alloc(32, 9), 'http://localhost:3000');
  t.equal(
    (await app.inject({ url: `/api/jobs/6f1c1a4e-8d39-4b8e-9a53-2a3f1f1e0c55`, headers: auth(forged) })).statusCode,
    401,
  );
});
