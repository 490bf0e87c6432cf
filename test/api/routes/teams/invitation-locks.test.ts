// Accepting an invitation takes its locks in the order inviting and resending
// take them (the workspace, then the invitation), so an accept racing a
// resend of the same invitation waits instead of deadlocking (PostgreSQL
// would abort one of them with 40P01: a 500 for somebody).
import pg from 'pg';
import t from 'tap';
import { createUser } from '../../../../core/accounts/users.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { waitFor } from '../../../helpers/wait.ts';

const PASSWORD = 'correct horse battery staple';
const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const ada = await createUser(db, { email: 'ada@locks.test', password: PASSWORD, displayName: 'Ada' });
const workspace = await createTenant(db, ada.id, 'Locks');
const login = await app.inject({
  method: 'POST',
  url: '/api/auth/login',
  payload: { email: 'ada@locks.test', password: PASSWORD },
});
const headers = { authorization: `Bearer ${login.json().token}`, 'x-tenant-id': workspace.id };

t.test('an accept waiting on the workspace holds no lock on the invitation', async (t) => {
  const invited = await app.inject({
    method: 'POST',
    url: '/api/tenants/invitations',
    headers,
    payload: { email: 'grace@locks.test', role: 'member' },
  });
  t.equal(invited.statusCode, 201, invited.body);
  const { id, link } = invited.json() as { id: string; link: string };

  // Another transaction in the middle of inviting or resending: the workspace is locked.
  const other = new pg.Client({ connectionString: databaseUrl });
  await other.connect();
  t.teardown(() => other.end());
  await other.query('begin');
  await other.query('select 1 from tenants where id = $1 for update', [workspace.id]);
  const accepted = app.inject({
    method: 'POST',
    url: '/api/invitations/accept',
    payload: { token: link.slice(link.indexOf('#') + 1), name: 'Grace', password: PASSWORD },
  });
  await waitFor('the accept to wait on the workspace lock', async () => {
    const { rows } = await other.query(
      `select count(*)::int as n from pg_stat_activity
       where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
    );
    return rows[0].n > 0;
  });
  // The other transaction goes on to the invitation, as resending does.
  await t.resolves(
    other.query('select 1 from tenant_invitations where id = $1 for update nowait', [id]),
    'the invitation is not held by the waiting accept',
  );
  await other.query('commit');
  const res = await accepted;
  t.equal(res.statusCode, 200, res.body);
});
