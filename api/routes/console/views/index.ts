// The console's pages by path: the GET routes and the live updates
// (api/routes/console/live.ts) find a page's view through this one table.
import { auditView } from './audit.ts';
import { bulkView } from './bulk.ts';
import { jobsView, jobView } from './jobs.ts';
import { overviewView, schedulesView, workersView } from './system.ts';
import { tenantsView, tenantView } from './tenants.ts';
import type { ViewFn } from './view.ts';

export type ConsolePage = { path: string; pattern: RegExp; params: string[]; view: ViewFn; nav?: string };

const page = (path: string, view: ViewFn, nav?: string): ConsolePage => {
  const params: string[] = [];
  const pattern = new RegExp(
    `^${path.replace(/:([a-zA-Z]+)/g, (_m, name: string) => {
      params.push(name);
      return '([^/]+)';
    })}$`,
  );
  return { path, pattern, params, view, nav };
};

export const CONSOLE_PAGES: ConsolePage[] = [
  page('/console', overviewView, 'Overview'),
  page('/console/jobs', jobsView, 'Jobs'),
  page('/console/jobs/bulk', bulkView),
  page('/console/jobs/:jobId', jobView),
  page('/console/workers', workersView, 'Workers'),
  page('/console/schedules', schedulesView, 'Schedules'),
  page('/console/tenants', tenantsView, 'Tenants'),
  page('/console/tenants/:tenantId', tenantView),
  page('/console/audit', auditView, 'Audit'),
];

/** The page a path (with its query) shows, with its parameters. */
export function findPage(
  pathWithQuery: string,
): { page: ConsolePage; params: Record<string, string>; query: Record<string, string> } | null {
  let url: URL;
  try {
    url = new URL(pathWithQuery, 'http://console.invalid');
  } catch {
    return null;
  }
  for (const p of CONSOLE_PAGES) {
    const m = p.pattern.exec(url.pathname);
    if (!m) continue;
    let params: Record<string, string>;
    try {
      params = Object.fromEntries(p.params.map((name, i) => [name, decodeURIComponent(m[i + 1]!)]));
    } catch {
      return null; // a malformed escape
    }
    return { page: p, params, query: Object.fromEntries(url.searchParams) };
  }
  return null;
}
