// Skills: sync from a directory (two good, one broken), changed bytes refused
// without a new version, binding to the syncing tenant, publish and catalog,
// env schema and configuration (secrets sealed, masked, never logged), 410s.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createMember } from '../../../helpers/fixtures.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'skills-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const skillMd = (name: string, version: string, extra = '') =>
  `---\nname: ${name}\ndescription: The ${name} skill.\nversion: ${version}\n${extra}---\n\nInstructions of ${name}.\n`;
function put(rel: string, text: string) {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), text);
}
put('alpha/SKILL.md', skillMd('alpha', '1.0.0', 'allowed-tools: Read Grep\n'));
put('alpha/scripts/run.sh', 'echo alpha\n');
put('beta/SKILL.md', skillMd('beta', '2'));
put('broken/SKILL.md', '---\nname: broken\n---\nno description\n');
put('notes.txt', 'a loose file is not a skill');

const databaseUrl = await createTestDatabase(t);
const { app, db, logs } = await buildTestApp(t, databaseUrl, { SKILLS_DIR: dir, LOG_LEVEL: 'debug' });
const owner = await createMember(db, 'admin');
const viewer = await createMember(db, 'viewer');
await db.query(
  sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${owner.tenantId}, ${viewer.userId}, 'viewer')`,
);
const other = await createMember(db, 'admin');
const h = (m: { token: string }, tenantId: string) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': tenantId });
const asOwner = h(owner, owner.tenantId);
const asViewer = h(viewer, owner.tenantId);
const sync = async (headers = asOwner) => {
  const res = await app.inject({ method: 'POST', url: '/api/skills/sync', headers });
  t.equal(res.statusCode, 200, res.body);
  return res.json() as {
    synced: { name: string; status: string; skillId: string }[];
    refused: { name: string; code: string; reason: string }[];
  };
};
// Answers read as loose JSON here.
const byName = <T extends { name: string }>(items: T[]): Record<string, any> =>
  Object.fromEntries(items.map((i) => [i.name, i]));
let alphaId = '';
let betaId = '';

t.test(
  'sync records two good skills, reports the broken one by name, and is a no-op when nothing changed',
  async (t) => {
    const first = await sync();
    t.same(
      first.synced.map((s) => [s.name, s.status]),
      [
        ['alpha', 'created'],
        ['beta', 'created'],
      ],
    );
    t.match(first.refused, [{ name: 'broken', code: 'invalid_manifest', reason: /description/ }]);
    alphaId = byName(first.synced).alpha!.skillId;
    betaId = byName(first.synced).beta!.skillId;
    const all = (await app.inject({ url: '/api/skills/all', headers: asOwner })).json().items;
    t.match(byName(all).alpha, {
      version: '1.0.0',
      published: false,
      allowedTools: ['Read', 'Grep'],
      fileCount: 2,
      files: [{ path: 'SKILL.md' }, { path: 'scripts/run.sh', bytes: 11 }],
    });
    t.match(byName(all).alpha.files[1].sha256, /^[0-9a-f]{64}$/);
    t.same(
      (await sync()).synced.map((s) => s.status),
      ['unchanged', 'unchanged'],
    );
    t.equal((await app.inject({ url: '/api/skills/all', headers: asViewer })).statusCode, 403, 'all is Admin only');
    t.equal((await app.inject({ method: 'POST', url: '/api/skills/sync', headers: asViewer })).statusCode, 403);
  },
);

t.test('changed bytes under the same version are refused; a new version is taken', async (t) => {
  const before = await db.oneFirst(
    sql.type(z.object({ tree_sha256: z.string() }))`select tree_sha256 from skills where id = ${alphaId}`,
  );
  put('alpha/scripts/run.sh', 'echo changed\n');
  const refused = await sync();
  t.match(
    refused.refused,
    [{ name: 'alpha', code: 'changed_without_new_version' }, { name: 'broken' }].sort((a, b) =>
      a.name < b.name ? -1 : 1,
    ),
  );
  t.same(
    refused.synced.map((s) => [s.name, s.status]),
    [['beta', 'unchanged']],
  );
  t.equal(
    await db.oneFirst(
      sql.type(z.object({ tree_sha256: z.string() }))`select tree_sha256 from skills where id = ${alphaId}`,
    ),
    before,
    'nothing recorded',
  );
  put('alpha/SKILL.md', skillMd('alpha', '1.1.0', 'allowed-tools: Read Grep\n'));
  const taken = await sync();
  t.match(byName(taken.synced).alpha, { status: 'updated', skillId: alphaId });
});

t.test('skills are bound to the tenant that synced them', async (t) => {
  const theirs = await sync(h(other, other.tenantId));
  t.notOk(
    theirs.synced.some((s) => s.skillId === alphaId),
    'their own rows',
  );
  const mine = (await app.inject({ url: '/api/skills/all', headers: asOwner }))
    .json()
    .items.map((s: { id: string }) => s.id)
    .sort();
  t.same(mine, [alphaId, betaId].sort());
  t.equal(
    (await app.inject({ method: 'POST', url: `/api/skills/${alphaId}/publish`, headers: h(other, other.tenantId) }))
      .statusCode,
    404,
    "another tenant's skill is not found",
  );
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: `/api/skills/${alphaId}/configure`,
        headers: h(other, other.tenantId),
        payload: { values: {} },
      })
    ).statusCode,
    404,
  );
});

t.test('publish puts a skill in the catalog; unpublish takes it out', async (t) => {
  t.same((await app.inject({ url: '/api/skills/catalog', headers: asViewer })).json().items, []);
  t.equal(
    (await app.inject({ method: 'POST', url: `/api/skills/${alphaId}/publish`, headers: asViewer })).statusCode,
    403,
  );
  const pub = await app.inject({ method: 'POST', url: `/api/skills/${alphaId}/publish`, headers: asOwner });
  t.equal(pub.statusCode, 200);
  t.match(pub.json(), { published: true, publishedAt: String });
  await app.inject({ method: 'POST', url: `/api/skills/${betaId}/publish`, headers: asOwner });
  t.same(
    (await app.inject({ url: '/api/skills/catalog', headers: asViewer }))
      .json()
      .items.map((s: { name: string }) => s.name),
    ['alpha', 'beta'],
  );
  await app.inject({ method: 'POST', url: `/api/skills/${betaId}/unpublish`, headers: asOwner });
  t.same(
    (await app.inject({ url: '/api/skills/catalog', headers: asViewer }))
      .json()
      .items.map((s: { name: string }) => s.name),
    ['alpha'],
  );
  t.same(
    (await app.inject({ url: '/api/skills/catalog', headers: h(other, other.tenantId) })).json().items,
    [],
    "not in another tenant's catalog",
  );
});

t.test('env schema, then configuration: required fields, types, secrets sealed and masked, reset', async (t) => {
  const bad = [
    [{ name: 'lower' }],
    [{ name: 'A' }, { name: 'A' }],
    [{ name: 'T', secret: true, default: 'x' }],
    [{ name: 'N', type: 'number', default: 'x' }],
    [{ name: 'X', type: 'file' }],
  ];
  for (const fields of bad)
    t.equal(
      (
        await app.inject({
          method: 'PUT',
          url: `/api/skills/${alphaId}/env-schema`,
          headers: asOwner,
          payload: { fields },
        })
      ).statusCode,
      400,
      JSON.stringify(fields),
    );
  const fields = [
    { name: 'API_TOKEN', required: true, secret: true, description: 'token' },
    { name: 'REGION', default: 'eu' },
    { name: 'LIMIT', type: 'number' },
  ];
  const schema = await app.inject({
    method: 'PUT',
    url: `/api/skills/${alphaId}/env-schema`,
    headers: asOwner,
    payload: { fields },
  });
  t.equal(schema.statusCode, 200);
  t.equal(schema.json().envSchema.length, 3);
  t.equal(
    (
      await app.inject({
        method: 'PUT',
        url: `/api/skills/${alphaId}/env-schema`,
        headers: asViewer,
        payload: { fields },
      })
    ).statusCode,
    403,
  );

  const configure = (values: object) =>
    app.inject({ method: 'POST', url: `/api/skills/${alphaId}/configure`, headers: asViewer, payload: { values } });
  const missing = await configure({ LIMIT: 5 });
  t.equal(missing.statusCode, 400);
  t.match(missing.json(), { error: 'invalid_skill_configuration', message: /API_TOKEN: required/ });
  t.equal((await configure({ API_TOKEN: 'tok-1234567890-secret', LIMIT: 'five' })).statusCode, 400, 'wrong type');
  t.equal((await configure({ API_TOKEN: 'tok-1234567890-secret', OTHER: 'x' })).statusCode, 400, 'unknown field');

  const secret = 'tok-1234567890-secret';
  const ok = await configure({ API_TOKEN: secret, LIMIT: 5 });
  t.equal(ok.statusCode, 200);
  t.notOk(ok.body.includes(secret), 'never in an answer');
  t.match(ok.json(), {
    configured: true,
    missing: [],
    fields: [
      { name: 'API_TOKEN', source: 'set', masked: '••••••••cret' },
      { name: 'REGION', source: 'default', value: 'eu' },
      { name: 'LIMIT', source: 'set', value: 5 },
    ],
  });
  t.notOk('value' in ok.json().fields[0]);
  const stored = await db.oneFirst(
    sql.type(z.object({ s: z.string() }))`select secrets::text as s from skill_configs where skill_id = ${alphaId}`,
  );
  t.notOk(stored.includes(secret), 'sealed at rest');
  const list = (await app.inject({ url: '/api/skills/list', headers: asViewer })).json().items;
  t.match(byName(list).alpha.configuration, { configured: true, fields: [{ masked: '••••••••cret' }] });
  t.notOk(JSON.stringify(list).includes(secret));
  // A later change without the secret keeps it.
  t.equal((await configure({ LIMIT: 7 })).json().configured, true);

  const reset = await app.inject({ method: 'DELETE', url: `/api/skills/${alphaId}/configure`, headers: asViewer });
  t.equal(reset.statusCode, 200);
  t.match(reset.json(), {
    configured: false,
    missing: ['API_TOKEN'],
    fields: [{ source: 'unset' }, { source: 'default', value: 'eu' }, { source: 'unset' }],
  });
  t.notOk(logs().includes(secret), 'never in the logs');
});

t.test('the retired registration routes answer 410 with the exact code', async (t) => {
  for (const [method, url] of [
    ['POST', '/api/skills/register'],
    ['DELETE', '/api/skills/register/some-skill'],
  ] as const) {
    const res = await app.inject({
      method,
      url,
      headers: asOwner,
      payload: method === 'POST' ? { name: 'x' } : undefined,
    });
    t.equal(res.statusCode, 410);
    t.match(res.json(), { error: 'legacy_skill_registration_retired', status: 410 });
  }
});
