// Insight boards: tenant-scoped boards with immutable, numbered content
// versions. Every read and write takes the tenant id, so another tenant's
// board looks exactly like a missing one.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type Transactor } from '../db/pool.ts';
import { BoardScopeNotFoundError, lockScope } from './scope.ts';

export const SCOPE_TYPES = ['company', 'agent'] as const;
export type ScopeType = (typeof SCOPE_TYPES)[number];

export const BoardRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  scope_type: z.enum(SCOPE_TYPES),
  scope_id: z.string(),
  title: z.string(),
  position: z.number(),
  latest_version: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type BoardRow = z.infer<typeof BoardRow>;
const boardRow = sql.type(BoardRow);
const COLUMNS = sql.fragment`id, tenant_id, scope_type, scope_id, title, position, latest_version, created_at, updated_at`;

export class BoardNotFoundError extends Error {
  override name = 'BoardNotFoundError';
  constructor() {
    super('No such board in this workspace.');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Board ids are UUIDs; any other (in-bounds) string simply names no board. */
export const isBoardId = (id: string) => UUID.test(id);

export { BoardScopeNotFoundError };

export type Creator = { principalId?: string; userId?: string };

export async function createBoard(
  db: Transactor,
  tenantId: string,
  creator: Creator,
  input: { title: string; scopeType: ScopeType; scopeId: string; content?: unknown },
): Promise<BoardRow> {
  return db.transaction(async (tx) => {
    // The scope must name a company or company agent of this tenant (else 404, nothing written).
    if (!(await lockScope(tx, tenantId, input.scopeType, input.scopeId)))
      throw new BoardScopeNotFoundError(input.scopeType);
    const board = await tx.one(boardRow`
      insert into insight_boards (tenant_id, scope_type, scope_id, title, created_by_principal, created_by_user)
      values (${tenantId}, ${input.scopeType}, ${input.scopeId}, ${input.title}, ${creator.principalId ?? null}, ${creator.userId ?? null})
      returning ${COLUMNS}`);
    if (input.content === undefined) return board;
    return appendVersion(tx, board.id, input.content);
  });
}

async function appendVersion(tx: CommonQueryMethods, boardId: string, content: unknown): Promise<BoardRow> {
  const board = await tx.one(boardRow`
    update insight_boards set latest_version = latest_version + 1, updated_at = now()
    where id = ${boardId} returning ${COLUMNS}`);
  await tx.query(sql.unsafe`
    insert into board_versions (board_id, version, content) values (${boardId}, ${board.latest_version}, ${sql.jsonb(content as never)})`);
  return board;
}

/** Saves new content as the next version; the row lock orders concurrent saves. */
export async function saveBoardVersion(
  db: Transactor,
  tenantId: string,
  boardId: string,
  content: unknown,
): Promise<BoardRow> {
  if (!isBoardId(boardId)) throw new BoardNotFoundError();
  return db.transaction(async (tx) => {
    const locked = await lockBoard(tx, tenantId, boardId);
    if (!locked) throw new BoardNotFoundError();
    return appendVersion(tx, boardId, content);
  });
}

export async function lockBoard(tx: CommonQueryMethods, tenantId: string, boardId: string): Promise<BoardRow | null> {
  if (!isBoardId(boardId)) return null;
  return tx.maybeOne(
    boardRow`select ${COLUMNS} from insight_boards where id = ${boardId} and tenant_id = ${tenantId} for update`,
  );
}

export async function findBoard(db: CommonQueryMethods, tenantId: string, boardId: string): Promise<BoardRow | null> {
  if (!isBoardId(boardId)) return null;
  return db.maybeOne(boardRow`select ${COLUMNS} from insight_boards where id = ${boardId} and tenant_id = ${tenantId}`);
}

export async function boardContent(db: CommonQueryMethods, boardId: string, version: number): Promise<unknown> {
  if (version < 1) return null;
  return db.maybeOneFirst(sql.type(z.object({ content: z.unknown() }))`
    select content from board_versions where board_id = ${boardId} and version = ${version}`);
}

export type BoardPage = { items: BoardRow[]; nextCursor: number | null };

/** Boards with position > cursor, in position order; next cursor only when the page is full. */
export async function listBoards(
  db: CommonQueryMethods,
  tenantId: string,
  query: { limit: number; cursor: number; scopeType?: ScopeType; scopeId?: string },
): Promise<BoardPage> {
  const filters = [sql.fragment`tenant_id = ${tenantId}`, sql.fragment`position > ${query.cursor}`];
  if (query.scopeType) filters.push(sql.fragment`scope_type = ${query.scopeType}`);
  if (query.scopeId) filters.push(sql.fragment`scope_id = ${query.scopeId}`);
  const rows = await db.any(boardRow`
    select ${COLUMNS} from insight_boards where ${sql.join(filters, sql.fragment` and `)}
    order by position limit ${query.limit}`);
  const last = rows.at(-1);
  return { items: [...rows], nextCursor: rows.length === query.limit && last ? last.position : null };
}
