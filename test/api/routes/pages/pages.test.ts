// Pages for people: the landing page, the API reference UI at /docs (served
// from the npm package's own assets, under a CSP), and the HTML 404 a
// browser gets, while API clients keep their JSON errors.
import t, { type Test } from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { buildTestApp } from '../../../helpers/app.ts';
import { createTestDatabase } from '../../../helpers/db.ts';

const BASE = 'https://platform.example.test';
const databaseUrl = await createTestDatabase(t);
const { app } = await buildTestApp(t, databaseUrl, { BASE_URL: BASE, AUTH_URL: 'https://id.example.test' });
const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** The headers of a page in the shared layout; its only <style> carries the nonce the CSP names. */
function checkPageHeaders(t: Test, res: LightMyRequestResponse) {
  t.match(res.headers['content-type'], /^text\/html; charset=utf-8/);
  const csp = String(res.headers['content-security-policy']);
  t.match(csp, /default-src 'none'/);
  t.match(csp, /frame-ancestors 'none'/);
  t.notMatch(csp, /unsafe-inline|script-src/, 'no script, no inline allowance');
  const nonce = /style-src 'nonce-([^']+)'/.exec(csp)?.[1];
  t.ok(nonce, 'style allowed by nonce only');
  t.match(res.body, `<style nonce="${nonce}">`);
  t.notMatch(res.body, /<script/i);
  t.match(res.body, '<meta name="viewport" content="width=device-width,initial-scale=1">');
  t.equal(res.headers['x-content-type-options'], 'nosniff');
  t.equal(res.headers['x-frame-options'], 'DENY');
}

t.test('GET / describes the service, links every entry point and shows readiness', async (t) => {
  const res = await app.inject({ url: '/', headers: { accept: BROWSER } });
  t.equal(res.statusCode, 200);
  checkPageHeaders(t, res);
  t.match(res.body, /^<!doctype html>/);
  t.match(res.body, /agents carry out tasks for companies inside workspaces/i);
  for (const path of [
    '/docs',
    '/openapi.json',
    '/docs/llms.txt',
    '/auth.md',
    '/arazzo.yaml',
    '/mcp',
    '/readyz',
    '/.well-known/oauth-protected-resource/api/agent',
    '/.well-known/oauth-protected-resource/mcp',
  ]) {
    t.match(res.body, `href="${path}"`, `links ${path}`);
  }
  for (const path of [
    '/openapi.json',
    '/docs/llms.txt',
    '/auth.md',
    '/arazzo.yaml',
    '/mcp',
    '/.well-known/oauth-protected-resource/mcp',
  ]) {
    t.match(res.body, `>${BASE}${path}</a>`, `shows ${path} under the deployment's base URL`);
  }
  t.match(res.body, /for MCP clients/);
  t.match(res.body, /Status: <span class="ok">ready<\/span>/, 'the same check as /readyz');
  t.equal((await app.inject({ url: '/readyz' })).json().status, 'ready');
  // Any client gets the page; there is no JSON variant of /.
  t.equal((await app.inject({ url: '/' })).statusCode, 200);
});

t.test('GET /docs: Swagger UI from the package, no external URL, under a CSP', async (t) => {
  const res = await app.inject({ url: '/docs', headers: { accept: BROWSER } });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/html/);
  t.match(res.body, '<div id="swagger-ui">');
  t.match(res.body, /<title>Agent platform API reference<\/title>/);
  t.match(res.body, 'name="viewport"');
  t.notMatch(res.body, /(src|href)="(https?:)?\/\//, 'no script, style or icon from elsewhere');
  t.notMatch(res.body, /<script(?![^>]*\ssrc=)[^>]*>/, 'no inline script (the CSP allows none)');
  const csp = String(res.headers['content-security-policy']);
  t.match(csp, /default-src 'none'/);
  t.match(csp, /script-src 'self'(;|$)/);
  t.match(csp, /style-src 'self'(;|$)/);
  t.match(csp, /frame-ancestors 'none'/);
  t.notMatch(csp, /unsafe-inline|unsafe-eval/);
  t.equal(res.headers['x-content-type-options'], 'nosniff');

  const assets = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  t.ok(
    assets.some((a) => a.endsWith('/swagger-ui-bundle.js')),
    'the bundle',
  );
  t.ok(
    assets.some((a) => a.endsWith('/swagger-ui.css')),
    'the style sheet',
  );
  for (const asset of assets) {
    t.match(asset, /^\/docs\/static\//, `${asset} is ours`);
    const file = await app.inject({ url: asset });
    t.equal(file.statusCode, 200, `${asset} answers`);
    t.ok(file.rawPayload.length > 0, `${asset} is not empty`);
  }
  const bundle = await app.inject({ url: '/docs/static/swagger-ui-bundle.js' });
  t.match(bundle.headers['content-type'], /javascript/);
  const init = await app.inject({ url: '/docs/static/swagger-initializer.js' });
  t.match(init.body, "resolveUrl('./json')", 'the UI loads /docs/json');
  t.match(init.body, 'validatorUrl: null', 'no external validator');
  t.notMatch(init.body.replace(/\/\/ .*$/gm, ''), /https?:\/\//, 'no external URL (outside comments)');

  const doc = await app.inject({ url: '/docs/json' });
  t.equal(doc.statusCode, 200);
  t.same(doc.json(), (await app.inject({ url: '/openapi.json' })).json(), 'the UI shows the published document');

  const slash = await app.inject({ url: '/docs/' });
  t.equal(slash.statusCode, 200, '/docs/ works too');
  t.match(slash.body, 'src="./static/swagger-ui-bundle.js"');
});

t.test('/docs/llms.txt and the other contracts are untouched by the UI', async (t) => {
  const llms = await app.inject({ url: '/docs/llms.txt', headers: { accept: BROWSER } });
  t.equal(llms.statusCode, 200);
  t.match(llms.headers['content-type'], /^text\/plain/);
  t.match(llms.body, /^# Agent platform/);
  t.notOk(llms.headers['content-security-policy'], "the UI's CSP stays on the UI's routes");
  t.equal((await app.inject({ url: '/auth.md' })).statusCode, 200);
  t.equal((await app.inject({ url: '/openapi.json' })).statusCode, 200);
});

t.test('unknown paths: HTML 404 for a browser navigation, JSON for everyone else', async (t) => {
  const page = await app.inject({ url: '/no/such/page', headers: { accept: BROWSER } });
  t.equal(page.statusCode, 404);
  checkPageHeaders(t, page);
  t.match(page.body, '<h1>Page not found</h1>');
  t.match(page.body, '<code>/no/such/page</code>');
  t.match(page.body, 'href="/"', 'a way back to the start page');

  const docsMiss = await app.inject({ url: '/docs/nothing-here', headers: { accept: BROWSER } });
  t.equal(docsMiss.statusCode, 404);
  t.match(docsMiss.headers['content-type'], /^text\/html/);

  const json = await app.inject({ url: '/no/such/page', headers: { accept: 'application/json' } });
  t.equal(json.statusCode, 404);
  t.same(json.json(), { error: 'not_found', status: 404, message: 'No route for GET /no/such/page' });
  const preferJson = await app.inject({
    url: '/no/such/page',
    headers: { accept: 'application/json, text/html;q=0.5' },
  });
  t.match(preferJson.headers['content-type'], /^application\/json/);
  const none = await app.inject({ url: '/no/such/page' });
  t.match(none.headers['content-type'], /^application\/json/, 'no Accept: JSON as before');
  const post = await app.inject({ method: 'POST', url: '/no/such/page', headers: { accept: BROWSER } });
  t.match(post.headers['content-type'], /^application\/json/, 'only navigations (GET, HEAD) get a page');

  // The machine surfaces keep their own shapes even for a browser.
  const platform = await app.inject({ url: '/api/nothing', headers: { accept: BROWSER } });
  t.equal(platform.statusCode, 404);
  t.same(platform.json(), { error: 'not_found', status: 404, message: 'No route for GET /api/nothing' });
  const agent = await app.inject({ url: '/api/agent/v1/nothing', headers: { accept: BROWSER } });
  t.equal(agent.statusCode, 404);
  t.same(agent.json(), {
    code: 'not_found',
    message: 'No route for GET /api/agent/v1/nothing',
    next_action: 'reread_list',
  });
  const identity = await app.inject({ url: '/oauth2/nothing', headers: { accept: BROWSER } });
  t.equal(identity.statusCode, 404);
  t.same(identity.json(), { code: 'not_found', message: 'No route for GET /oauth2/nothing' });
  for (const url of ['/mcp/nothing', '/.well-known/nothing', '/agent/identity/nothing']) {
    const res = await app.inject({ url, headers: { accept: BROWSER } });
    t.equal(res.statusCode, 404, url);
    t.match(res.headers['content-type'], /^application\/json/, `${url} stays JSON`);
  }
});

t.test('the 404 page escapes the path it shows', async (t) => {
  const evil = '/%3Cscript%3Ealert(1)%3C/script%3E%22%3E%3Cimg%20src=x%20onerror=alert(2)%3E';
  const res = await app.inject({ url: evil, headers: { accept: BROWSER } });
  t.equal(res.statusCode, 404);
  t.notMatch(res.body, /<script/i);
  t.notMatch(res.body, /<img/i);
  t.match(res.body, '&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;');
  const long = await app.inject({ url: `/${'a'.repeat(5000)}`, headers: { accept: BROWSER } });
  t.equal(long.statusCode, 404);
  t.ok(long.body.length < 5000, 'a long path is shown shortened');
});
