// The roles matrix of docs/accounts-and-tenants.md, made from the OpenAPI
// document: every tenant-scoped operation carries the role its route
// declares (`x-tenant-role`, set by api/plugins/tenant.ts), so the table
// cannot drift from the code. test/docs/roles-matrix.test.ts checks the page
// holds exactly this text and walks the matrix over HTTP for each role.
import { roleAtLeast, ROLE_TITLES, TENANT_ROLES, type TenantRole } from '../core/tenants/roles.ts';

type Operation = { operationId?: string; summary?: string; tags?: string[]; 'x-tenant-role'?: TenantRole };
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

/** Every operation that declares a tenant role, by area (its first tag), then path and method. */
export function matrixRows(doc: Document): MatrixRow[] {
  const rows: MatrixRow[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const role = op['x-tenant-role'];
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
  const rows = matrixRows(doc);
  const areas = [...new Set(rows.map((r) => r.area))];
  const out: string[] = [MATRIX_START, ''];
  for (const area of areas) {
    out.push(
      `**${area}**`,
      '',
      `| Operation | ${TENANT_ROLES.map((r) => ROLE_TITLES[r]).join(' | ')} |`,
      `|---|${TENANT_ROLES.map(() => ':-:').join('|')}|`,
    );
    for (const row of rows.filter((r) => r.area === area)) {
      const marks = TENANT_ROLES.map((r) => (roleAtLeast(r, row.role) ? 'yes' : '-'));
      out.push(`| \`${row.method} ${row.path}\` ${row.summary.replaceAll('|', '\\|')} | ${marks.join(' | ')} |`);
    }
    out.push('');
  }
  out.push(MATRIX_END);
  return out.join('\n');
}
