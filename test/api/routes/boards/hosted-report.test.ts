// The hosted board as a readable report: the documented mapping of content
// (paragraphs, metric cards, sections, lists, definition lists), escaping,
// JSON for clients that ask for it, and the HTML 404 of a dead link.
import t from 'tap';
import { sql } from '../../../../core/db/pool.ts';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import { humanize, renderReport } from '../../../../api/pages/report.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes, createMember, markClaimed } from '../../../helpers/fixtures.ts';
import { agentAccessToken } from '../../../helpers/principals.ts';

const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

t.test('the mapping', async (t) => {
  const report = renderReport({
    summary: 'First paragraph\nsame paragraph.\n\nSecond <p>aragraph.',
    metrics: { monthly_revenue: { value: 12500.5, unit: 'EUR' }, activeUsers: 42 },
    sections: [{ title: 'Regions', text: 'EMEA led.', items: ['EMEA', 'APAC'] }, 'loose'],
    items: [{ name: 'Deal A', amount: 10 }, 'plain'],
    owner: { name: 'Ops', tags: ['a', 'b'], active: true, note: null },
  }).value;
  t.match(report, '<p>First paragraph<br>same paragraph.</p><p>Second &lt;p&gt;aragraph.</p>');
  t.match(report, /<h2>Metrics<\/h2><ul class="cards">/);
  t.match(
    report,
    /class="card-label">Monthly revenue<\/span><span class="card-value"><span class="num">12,<wbr>500.5<\/span> <small>EUR<\/small>/,
  );
  t.match(report, /class="card-label">Active users<\/span><span class="card-value"><span class="num">42</);
  t.match(
    report,
    /<section><h3>Regions<\/h3>.*<p>EMEA led\.<\/p>.*<h4>Items<\/h4><ul class="items"><li>EMEA<\/li><li>APAC<\/li><\/ul>/s,
  );
  t.match(report, '<section><h3>Section 2</h3>');
  t.match(
    report,
    /<h2>Items<\/h2><ul class="items"><li><dl><dt>Name<\/dt><dd>Deal A<\/dd><dt>Amount<\/dt><dd>10<\/dd><\/dl><\/li><li>plain<\/li>/,
  );
  t.match(
    report,
    /<h2>Owner<\/h2><dl><dt>Name<\/dt><dd>Ops<\/dd><dt>Tags<\/dt><dd><ul class="items"><li>a<\/li><li>b<\/li><\/ul><\/dd><dt>Active<\/dt><dd>yes<\/dd><dt>Note<\/dt><dd>—<\/dd><\/dl>/,
  );
  t.match(
    renderReport({ metrics: [{ label: 'Churn', value: 0.02, unit: '%' }] }).value,
    /Churn<\/span><span class="card-value"><span class="num">0.02<\/span> <small>%/,
  );
  t.match(
    renderReport({ metrics: 'not metrics' }).value,
    '<h2>Metrics</h2><p>not metrics</p>',
    'unusable metrics fall back to the generic form',
  );
  t.match(
    renderReport([1, 'two', { three: 3 }]).value,
    '<ul class="items"><li>1</li><li>two</li><li><dl><dt>Three</dt><dd>3</dd></dl></li></ul>',
  );
  let deep: unknown = 'bottom';
  for (let i = 0; i < 20; i++) deep = { level: deep };
  t.match(renderReport(deep).value, '<pre>', 'deep nesting ends in formatted JSON');
  t.notMatch(renderReport({ '<k>': '<v>' }).value, /<k>|<v>/, 'keys and values are escaped');
  t.equal(humanize('monthlyRevenue_total'), 'Monthly revenue total');
});

t.test('the hosted page: report, JSON on request, HTML 404 after unpublish', async (t) => {
  const databaseUrl = await createTestDatabase(t);
  const { app, db, config, logs } = await buildTestApp(t, databaseUrl, { LOG_LEVEL: 'info' });
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.4', claimTokenTtlS: 600 });
  await markClaimed(db, registration.id);
  const token = await agentAccessToken(app, config, registration, ['svc:boards:read', 'svc:boards:publish']);
  const admin = await createMember(db, 'admin');
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${registration.tenant_id}, ${admin.userId}, 'admin')`,
  );
  let keys = 0;
  const post = (url: string, payload: object) =>
    app.inject({
      method: 'POST',
      url,
      payload,
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': `hosted-key-${++keys}` },
    });

  const content = {
    summary: 'Good week.\n\nBetter than the last.',
    metrics: { signups: 31 },
    items: ['<script>x</script>'],
  };
  const id = (
    await post('/api/agent/v1/boards', {
      title: 'Weekly',
      scope_type: 'company',
      scope_id: (await createBoardScopes(db, registration.tenant_id)).companyId,
      content,
    })
  ).json().id;
  const asked = (await post(`/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  await app.inject({
    method: 'POST',
    url: `/api/boards/approvals/${asked.approval.id}/approve`,
    headers: { authorization: `Bearer ${admin.token}`, 'x-tenant-id': registration.tenant_id },
  });
  const { link } = (await post(`/api/agent/v1/boards/${id}/publish`, { visibility: 'public' })).json();
  const path = new URL(link.url).pathname;

  const page = await app.inject({ url: path, headers: { accept: BROWSER } });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /^text\/html/);
  for (const [name, value] of [
    ['cache-control', 'no-store'],
    ['referrer-policy', 'no-referrer'],
    ['x-robots-tag', 'noindex'],
  ])
    t.equal(page.headers[name!], value);
  t.match(page.body, '<h1>Weekly</h1>');
  t.match(page.body, 'Version 1');
  t.match(page.body, '<p>Good week.</p><p>Better than the last.</p>');
  t.match(page.body, /class="card-label">Signups<\/span><span class="card-value"><span class="num">31</);
  t.match(page.body, '<li>&lt;script&gt;x&lt;/script&gt;</li>');
  t.notMatch(page.body, '<script');

  const json = await app.inject({ url: path, headers: { accept: 'application/json' } });
  t.match(json.headers['content-type'], /^application\/json/);
  t.same(json.json(), { title: 'Weekly', version: 1, content });

  await post(`/api/agent/v1/boards/${id}/unpublish`, {});
  const gone = await app.inject({ url: path, headers: { accept: BROWSER } });
  t.equal(gone.statusCode, 404);
  t.match(gone.headers['content-type'], /^text\/html/);
  t.equal(gone.headers['cache-control'], 'no-store');
  t.equal(gone.headers['x-robots-tag'], 'noindex');
  t.match(gone.body, '<h1>This board link does not work</h1>');
  t.notMatch(gone.body, 'Weekly');
  const goneJson = await app.inject({ url: path, headers: { accept: 'application/json' } });
  t.equal(goneJson.statusCode, 404);
  t.equal(goneJson.json().error, 'not_found', 'JSON clients keep the platform error shape');
  t.notMatch(logs(), link.secret, 'the secret never reaches the logs');
});
