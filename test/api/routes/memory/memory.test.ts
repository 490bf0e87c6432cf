// Memory: a JWT alone reaches the caller's own workspace; settings and limits;
// unsafe file names refused; the retention job deletes old files and records its run.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer'); // a viewer of its own tenant: no workspace of its own
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const outsider = await createMember(db, 'admin');
const auth = (m: { token: string }, tenantId?: string) => ({
  authorization: `Bearer ${m.token}`,
  ...(tenantId ? { 'x-tenant-id': tenantId } : {}),
});
const write = (m: { token: string }, payload: object, tenantId?: string) =>
  app.inject({ method: 'POST', url: '/api/memory/content', headers: auth(m, tenantId), payload });

t.test("a JWT alone acts in the caller's own workspace; x-tenant-id picks another", async (t) => {
  const put = await write(owner, { filename: 'notes.md', content: 'The user likes green tea.' });
  t.equal(put.statusCode, 200);
  t.match(put.json(), { name: 'notes.md', bytes: 25, content: 'The user likes green tea.' });
  const appended = await write(owner, { filename: 'notes.md', content: ' And short answers.' });
  t.equal(appended.json().content, 'The user likes green tea. And short answers.');

  const own = await app.inject({ url: '/api/memory/files', headers: auth(owner) });
  t.equal(own.statusCode, 200);
  t.equal(own.json().tenantId, owner.tenantId);
  t.same(
    own.json().files.map((f: { name: string }) => f.name),
    ['notes.md'],
  );
  const viaHeader = await app.inject({ url: '/api/memory/files', headers: auth(viewer, owner.tenantId) });
  t.equal(viaHeader.statusCode, 200, 'a viewer reads with the header');
  t.same(viaHeader.json(), own.json());

  const content = await app.inject({ url: '/api/memory/content', headers: auth(owner) });
  t.match(content.json(), {
    enabled: true,
    files: ['notes.md'],
    truncated: false,
    text: /## Memory[\s\S]*### notes.md\nThe user likes green tea. And short answers./,
  });
  const file = await app.inject({ url: '/api/memory/files/notes.md', headers: auth(owner) });
  t.equal(file.json().content, 'The user likes green tea. And short answers.');

  t.equal(
    (await write(viewer, { filename: 'x.md', content: 'no' }, owner.tenantId)).statusCode,
    403,
    'a viewer cannot write',
  );
  const ambiguous = await app.inject({ url: '/api/memory/files', headers: auth(viewer) });
  t.equal(ambiguous.statusCode, 400, 'a viewer of two tenants who administers none must say which');
  t.match(ambiguous.json().message, /x-tenant-id/);
  await db.query(
    sql.unsafe`delete from tenant_memberships where user_id = ${viewer.userId} and tenant_id = ${viewer.tenantId}`,
  );
  const only = await app.inject({ url: '/api/memory/files', headers: auth(viewer) });
  t.equal(only.statusCode, 200, 'with one tenant left, that one');
  t.same(only.json(), own.json());
  t.equal((await write(viewer, { filename: 'x.md', content: 'no' })).statusCode, 403, 'and still cannot write there');
  const loner = await createMember(db, 'admin');
  await db.query(sql.unsafe`delete from tenant_memberships where user_id = ${loner.userId}`);
  const none = await app.inject({ url: '/api/memory/files', headers: auth(loner) });
  t.equal(none.statusCode, 404, 'no workspace at all');
  t.equal(none.json().error, 'workspace_not_found');
  t.equal(
    (await app.inject({ url: '/api/memory/files', headers: auth(outsider, owner.tenantId) })).statusCode,
    404,
    'another tenant is not found',
  );
  t.equal(
    (await app.inject({ url: '/api/memory/files/notes.md', headers: auth(outsider) })).statusCode,
    404,
    "the outsider's own workspace has no such file",
  );
  t.equal((await app.inject({ url: '/api/memory/files' })).statusCode, 401);

  const replaced = await write(owner, { filename: 'notes.md', content: 'Replaced.', mode: 'replace' });
  t.equal(replaced.json().content, 'Replaced.');
  t.equal(
    (await app.inject({ method: 'DELETE', url: '/api/memory/files/notes.md', headers: auth(owner) })).statusCode,
    204,
  );
  t.equal(
    (await app.inject({ method: 'DELETE', url: '/api/memory/files/notes.md', headers: auth(owner) })).statusCode,
    404,
  );
});

t.test('unsafe file names are refused', async (t) => {
  for (const name of ['../etc/passwd', 'a/b', 'a\\b', '..', 'x..y', '.hidden', 'a'.repeat(101), 'sp ace', 'ü.md']) {
    const res = await write(owner, { filename: name, content: 'x' });
    t.equal(res.statusCode, 400, name);
    t.equal(res.json().error, 'invalid_filename', name);
  }
  for (const path of ['..%2Fsecret', 'a%2Fb', 'a'.repeat(101)]) {
    const res = await app.inject({ url: `/api/memory/files/${path}`, headers: auth(owner) });
    t.equal(res.statusCode, 400, path);
  }
  // An encoded '..' segment never reaches the route as a name.
  t.ok([400, 404].includes((await app.inject({ url: '/api/memory/files/%2E%2E', headers: auth(owner) })).statusCode));
  t.equal((await write(owner, { filename: 'ok-name_1.txt', content: 'x' })).statusCode, 200);
});

t.test('limits: per file, in total and file count are refused with a code; nothing written', async (t) => {
  const cfg = await app.inject({
    method: 'POST',
    url: '/api/memory/config',
    headers: auth(owner),
    payload: { maxFiles: 3, maxFileBytes: 100, maxTotalBytes: 150, retentionDays: 7 },
  });
  t.equal(cfg.statusCode, 200);
  t.match(cfg.json(), { enabled: true, maxFiles: 3, maxFileBytes: 100, maxTotalBytes: 150, retentionDays: 7 });
  const bad = await app.inject({
    method: 'POST',
    url: '/api/memory/config',
    headers: auth(owner),
    payload: { maxFileBytes: 200 },
  });
  t.equal(bad.statusCode, 400, 'file limit above total');
  t.equal(bad.json().error, 'invalid_memory_limits');
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/memory/config',
        headers: auth(owner),
        payload: { retentionDays: 0 },
      })
    ).statusCode,
    400,
  );
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: '/api/memory/config',
        headers: auth(viewer, owner.tenantId),
        payload: { enabled: false },
      })
    ).statusCode,
    403,
  );

  const big = await write(owner, { filename: 'big.md', content: 'x'.repeat(101) });
  t.equal(big.statusCode, 413);
  t.equal(big.json().error, 'memory_file_too_large');
  t.equal((await write(owner, { filename: 'a.md', content: 'x'.repeat(90) })).statusCode, 200);
  const grow = await write(owner, { filename: 'a.md', content: 'y'.repeat(20) });
  t.equal(grow.json().error, 'memory_file_too_large', 'an append counts the whole file');
  const total = await write(owner, { filename: 'b.md', content: 'x'.repeat(70) });
  t.equal(total.statusCode, 413);
  t.equal(total.json().error, 'memory_total_too_large');
  t.equal((await write(owner, { filename: 'b.md', content: 'x' })).statusCode, 200);
  const many = await write(owner, { filename: 'c.md', content: 'x' });
  t.equal(many.statusCode, 400, 'ok-name_1.txt, a.md, b.md already');
  t.equal(many.json().error, 'memory_too_many_files');
  const files = (await app.inject({ url: '/api/memory/files', headers: auth(owner) })).json();
  t.same(files.files.map((f: { name: string }) => f.name).sort(), ['a.md', 'b.md', 'ok-name_1.txt']);
  t.equal(files.totalBytes, 92);

  const off = await app.inject({
    method: 'POST',
    url: '/api/memory/config',
    headers: auth(owner),
    payload: { enabled: false },
  });
  t.equal(off.json().enabled, false);
  t.match((await app.inject({ url: '/api/memory/content', headers: auth(owner) })).json(), {
    enabled: false,
    text: '',
    files: [],
  });
  await app.inject({ method: 'POST', url: '/api/memory/config', headers: auth(owner), payload: { enabled: true } });
});

t.test("the retention job deletes files past their tenant's retention and records its run", async (t) => {
  // owner: 7 days (set above); outsider: the default 90 days.
  await write(outsider, { filename: 'old.md', content: 'old' });
  await write(outsider, { filename: 'recent.md', content: 'recent' });
  await db.query(
    sql.unsafe`update memory_files set updated_at = now() - interval '100 days' where tenant_id = ${outsider.tenantId} and name = 'old.md'`,
  );
  await db.query(
    sql.unsafe`update memory_files set updated_at = now() - interval '30 days' where tenant_id = ${outsider.tenantId} and name = 'recent.md'`,
  );
  await db.query(
    sql.unsafe`update memory_files set updated_at = now() - interval '8 days' where tenant_id = ${owner.tenantId} and name = 'a.md'`,
  );

  const worker = await startTestWorker(t, databaseUrl);
  await worker.runner.addJob('memory.retention', {});
  const run = await waitFor('the retention run to be recorded', () =>
    db.maybeOne(
      sql.type(
        z.object({ status: z.string(), detail: z.unknown() }),
      )`select status, detail from scheduled_job_runs where task = 'memory.retention'`,
    ),
  );
  t.match(run, { status: 'succeeded', detail: { deleted: 2 } });
  const left = await db.anyFirst(sql.type(z.object({ name: z.string() }))`select name from memory_files order by name`);
  t.same(left, ['b.md', 'ok-name_1.txt', 'recent.md']);
});
