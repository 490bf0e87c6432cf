// npm run tenant:plan: an operator sets a tenant's plan by hand; the change
// goes through the same entitlements as Stripe and in-app purchases, is
// recorded, and the higher active grant wins.
import t from 'tap';
import { z } from 'zod';
import { setEntitlement } from '../../core/billing/entitlements.ts';
import { sql } from '../../core/db/pool.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase, testPool } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { spawnEntry } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);

const run = async (args: string[]) => {
  const p = spawnEntry(t, 'ops/tenant-plan.ts', testEnv(databaseUrl, { LOG_LEVEL: 'warn' }), { args });
  return { code: await p.exited, output: p.output() };
};
const tenant = (id: string) =>
  db.one(sql.type(z.object({ plan: z.string(), plan_source: z.string().nullable(), plan_status: z.string() }))`
    select plan, plan_source, plan_status from tenants where id = ${id}`);

t.test('sets, records and removes an operator plan', async (t) => {
  const m = await createMember(db);
  const set = await run(['--tenant', m.tenantId, '--plan', 'pro', '--reason', 'pilot customer']);
  t.equal(set.code, 0, set.output);
  t.match(set.output, /now on the pro plan \(from operator\)/);
  t.match(await tenant(m.tenantId), { plan: 'pro', plan_source: 'operator', plan_status: 'active' });
  const changes = await db.any(sql.type(z.object({ from_plan: z.string(), to_plan: z.string(), reason: z.string() }))`
    select from_plan, to_plan, reason from billing_changes where tenant_id = ${m.tenantId}`);
  t.match(
    changes,
    [{ from_plan: 'free', to_plan: 'pro', reason: /^operator .+: pilot customer$/ }],
    'recorded with who and why',
  );

  // A paid in-app enterprise grant outranks the operator's pro; removing the operator grant keeps it.
  await db.transaction((tx) =>
    setEntitlement(
      tx,
      {
        tenantId: m.tenantId,
        source: 'in_app',
        plan: 'enterprise',
        status: 'active',
        expiresAt: new Date(Date.now() + 86_400_000),
      },
      'test',
    ),
  );
  t.match(await tenant(m.tenantId), { plan: 'enterprise', plan_source: 'in_app' }, 'the higher active grant wins');
  const free = await run(['--tenant', m.tenantId, '--plan', 'free']);
  t.equal(free.code, 0, free.output);
  t.match(await tenant(m.tenantId), { plan: 'enterprise', plan_source: 'in_app' });
});

t.test('refuses bad input with a message', async (t) => {
  const m = await createMember(db);
  for (const [args, message, code] of [
    [['--tenant', 'nope', '--plan', 'pro'], /--tenant must be the tenant id/, 2],
    [['--tenant', m.tenantId, '--plan', 'gold'], /--plan must be one of free, pro, enterprise/, 2],
    [['--tenant', '00000000-0000-4000-8000-000000000000', '--plan', 'pro'], /no tenant/, 1],
    [['--tenant', m.tenantId, '--plan', 'pro', '--until', '2001-01-01'], /--until must be a future date/, 2],
  ] as const) {
    const r = await run([...args]);
    t.equal(r.code, code, `${args.join(' ')}: exit ${code} (2 is a usage error, shown with the usage)`);
    if (code === 2) t.match(r.output, /usage: node (--import tsx )?ops\/tenant-plan\.[jt]s/); // as node started it
    t.match(r.output, message);
  }
  t.match(await tenant(m.tenantId), { plan: 'free', plan_source: null }, 'nothing changed');
});
