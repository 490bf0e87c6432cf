// The roles matrix of docs/accounts-and-tenants.md, made from the OpenAPI
// document: every tenant-scoped operation carries the role its route
// declares (`x-tenant-role`, set by api/plugins/tenant.ts), so the table
// cannot drift from the code. test/docs/roles-matrix.test.ts checks the page
// holds exactly this text and walks the matrix over HTTP for each role. A
// second matrix does the same for the Agent API: what a claimed agent may do
// for each role of the person who claimed it (`x-claimer-role`, set by
// api/routes/agent/operation.ts).
import { roleAtLeast, ROLE_TITLES, TENANT_ROLES, type TenantRole } from '../core/tenants/roles.ts';

type RoleKey = 'x-tenant-role' | 'x-claimer-role';
type Operation = { operationId?: string; summary?: string; tags?: string[] } & Partial<Record<RoleKey, TenantRole>>;
type Document = { paths: Record<string, Record<string, Operation>> };

export type MatrixRow = {
  area: string;
  method: string;
  path: string;
  operationId: string;
  summary: string;
  role: TenantRole;
};

export const MATRIX_START =
  '<!-- roles matrix: made by test/docs/roles-matrix.test.ts from the routes; do not edit by hand -->';
export const MATRIX_END = '<!-- end of roles matrix -->';
export const AGENT_MATRIX_START =
  "<!-- agent roles matrix: made by test/docs/roles-matrix.test.ts from the Agent API's operations; do not edit by hand -->";
export const AGENT_MATRIX_END = '<!-- end of agent roles matrix -->';

/**
 * Every operation that declares a tenant role (or, with `x-claimer-role`, the
 * role an agent's claimer needs), by area (its first tag), then path and method.
 */
export function matrixRows(doc: Document, key: RoleKey = 'x-tenant-role'): MatrixRow[] {
  const rows: MatrixRow[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const role = op[key];
      if (!role) continue;
      rows.push({
        area: op.tags?.[0] ?? 'other',
        method: method.toUpperCase(),
        path,
        operationId: op.operationId ?? '',
        summary: op.summary ?? '',
        role,
      });
    }
  }
  return rows.sort(
    (a, b) => a.area.localeCompare(b.area) || a.path.localeCompare(b.path) || a.method.localeCompare(b.method),
  );
}

/** The matrix as Markdown: one table per area, a column per role. */
export function rolesMatrix(doc: Document): string {
  return markdown(matrixRows(doc), MATRIX_START, MATRIX_END);
}

/** The Agent API's matrix: a column per role of the agent's claimer. */
export function agentRolesMatrix(doc: Document): string {
  // The operationId is also the MCP tool's name, which the same role check guards.
  const label = (row: MatrixRow) => `\`${row.method} ${row.path}\` (tool \`${row.operationId}\`) ${row.summary}`;
  return markdown(matrixRows(doc, 'x-claimer-role'), AGENT_MATRIX_START, AGENT_MATRIX_END, label);
}

const pathLabel = (row: MatrixRow) => `\`${row.method} ${row.path}\` ${row.summary}`;

function markdown(rows: MatrixRow[], start: string, end: string, label = pathLabel): string {
  const areas = [...new Set(rows.map((r) => r.area))];
  const out: string[] = [start, ''];
  for (const area of areas) {
    out.push(
      `**${area}**`,
      '',
      `| Operation | ${TENANT_ROLES.map((r) => ROLE_TITLES[r]).join(' | ')} |`,
      `|---|${TENANT_ROLES.map(() => ':-:').join('|')}|`,
    );
    for (const row of rows.filter((r) => r.area === area)) {
      const marks = TENANT_ROLES.map((r) => (roleAtLeast(r, row.role) ? 'yes' : '-'));
      out.push(`| ${label(row).replaceAll('|', '\\|')} | ${marks.join(' | ')} |`);
    }
    out.push('');
  }
  out.push(end);
  return out.join('\n');
}
