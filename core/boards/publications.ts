// Hosted publication of insight boards. A private publication happens at
// once; a public one needs a person's approval of the exact request (its
// fingerprint), consumed by the identical retry. Link secrets are random,
// returned once and stored only as SHA-256; the hosted page looks them up by
// hash, so a revoked or rotated-out secret stops working at once.
import { z } from 'zod';
import { randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type Transactor } from '../db/pool.ts';
import { fingerprint } from '../idempotency.ts';
import { BoardNotFoundError, boardContent, lockBoard, findBoard } from './boards.ts';

export type Visibility = 'private' | 'public';

export const PublicationRow = z.object({
  board_id: z.string(),
  state: z.enum(['unpublished', 'published']),
  version: z.number().nullable(),
  visibility: z.enum(['private', 'public']).nullable(),
  published_at: z.string().nullable(),
  unpublished_at: z.string().nullable(),
  link_created_at: z.string().nullable(),
});
export type PublicationRow = z.infer<typeof PublicationRow>;

export class BoardVersionMissingError extends Error {
  override name = 'BoardVersionMissingError';
}
export class NotPublishedPubliclyError extends Error {
  override name = 'NotPublishedPubliclyError';
  constructor() {
    super('The board is not published publicly; publish it with visibility public first.');
  }
}

export type NewLink = { secret: string; createdAt: string };
export type PublishOutcome =
  | { kind: 'published'; publication: PublicationRow; link: NewLink | null }
  | { kind: 'approval_required'; approvalId: string }
  | { kind: 'approval_denied'; approvalId: string };

/** Publication state of a board (never a secret). */
export async function readPublication(
  db: CommonQueryMethods,
  tenantId: string,
  boardId: string,
): Promise<PublicationRow> {
  const board = await findBoard(db, tenantId, boardId);
  if (!board) throw new BoardNotFoundError();
  const row = await db.maybeOne(sql.type(PublicationRow)`
    select p.board_id, p.state, p.version, p.visibility, p.published_at, p.unpublished_at,
      (select l.created_at from board_links l where l.board_id = p.board_id and l.revoked_at is null) as link_created_at
    from board_publications p where p.board_id = ${board.id}`);
  return (
    row ?? {
      board_id: board.id,
      state: 'unpublished',
      version: null,
      visibility: null,
      published_at: null,
      unpublished_at: null,
      link_created_at: null,
    }
  );
}

async function revokeLinks(tx: CommonQueryMethods, boardId: string): Promise<number> {
  const revoked = await tx.any(sql.type(z.object({ id: z.string() }))`
    update board_links set revoked_at = now() where board_id = ${boardId} and revoked_at is null returning id`);
  return revoked.length;
}

async function issueLink(tx: CommonQueryMethods, boardId: string): Promise<NewLink> {
  const secret = randomToken('bl_');
  const createdAt = await tx.oneFirst(sql.type(z.object({ created_at: z.string() }))`
    insert into board_links (board_id, secret_hash) values (${boardId}, ${sha256(secret)}) returning created_at`);
  return { secret, createdAt };
}

export async function publishBoard(
  db: Transactor,
  input: { tenantId: string; boardId: string; principalId: string; body: { version?: number; visibility: Visibility } },
): Promise<PublishOutcome> {
  return db.transaction(async (tx) => {
    const board = await lockBoard(tx, input.tenantId, input.boardId);
    if (!board) throw new BoardNotFoundError();
    const version = input.body.version ?? board.latest_version;
    if (version < 1 || version > board.latest_version) {
      throw new BoardVersionMissingError(
        board.latest_version < 1
          ? 'The board has no saved content yet; save a version first.'
          : `The board has no version ${version}.`,
      );
    }
    const visibility = input.body.visibility;
    if (visibility === 'public') {
      // The approval covers this exact request: board, resolved version, visibility and body.
      const print = fingerprint({ board: board.id, version, visibility, body: input.body });
      const latest = await tx.maybeOne(sql.type(
        z.object({ id: z.string(), state: z.enum(['pending', 'approved', 'denied', 'consumed']) }),
      )`
        select id, state from board_publish_approvals
        where board_id = ${board.id} and request_fingerprint = ${print} order by created_at desc limit 1`);
      if (latest?.state === 'pending') return { kind: 'approval_required', approvalId: latest.id };
      if (latest?.state === 'denied') return { kind: 'approval_denied', approvalId: latest.id };
      if (latest?.state !== 'approved') {
        const id = await tx.oneFirst(sql.type(z.object({ id: z.string() }))`
          insert into board_publish_approvals (tenant_id, board_id, request_fingerprint, version, visibility, requested_by_principal)
          values (${input.tenantId}, ${board.id}, ${print}, ${version}, ${visibility}, ${input.principalId}) returning id`);
        return { kind: 'approval_required', approvalId: id };
      }
      await tx.query(sql.unsafe`update board_publish_approvals set state = 'consumed' where id = ${latest.id}`);
    }
    await tx.query(sql.unsafe`
      insert into board_publications (board_id, tenant_id, state, version, visibility, published_at)
      values (${board.id}, ${input.tenantId}, 'published', ${version}, ${visibility}, now())
      on conflict (board_id) do update set state = 'published', version = excluded.version,
        visibility = excluded.visibility, published_at = now(), unpublished_at = null`);
    let link: NewLink | null = null;
    if (visibility === 'private') {
      // A private board has no working public link.
      await revokeLinks(tx, board.id);
    } else {
      const active = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
        select id from board_links where board_id = ${board.id} and revoked_at is null`);
      if (!active) link = await issueLink(tx, board.id);
    }
    return { kind: 'published', publication: await readPublication(tx, input.tenantId, board.id), link };
  });
}

export async function unpublishBoard(
  db: Transactor,
  tenantId: string,
  boardId: string,
): Promise<{ publication: PublicationRow; revokedLinks: number }> {
  return db.transaction(async (tx) => {
    const board = await lockBoard(tx, tenantId, boardId);
    if (!board) throw new BoardNotFoundError();
    await tx.query(sql.unsafe`
      insert into board_publications (board_id, tenant_id, state, unpublished_at) values (${board.id}, ${tenantId}, 'unpublished', now())
      on conflict (board_id) do update set state = 'unpublished', unpublished_at = now()`);
    const revokedLinks = await revokeLinks(tx, board.id);
    return { publication: await readPublication(tx, tenantId, board.id), revokedLinks };
  });
}

export async function rotateBoardLink(
  db: Transactor,
  tenantId: string,
  boardId: string,
): Promise<{ link: NewLink; revokedLinks: number }> {
  return db.transaction(async (tx) => {
    const board = await lockBoard(tx, tenantId, boardId);
    if (!board) throw new BoardNotFoundError();
    const current = await readPublication(tx, tenantId, board.id);
    if (current.state !== 'published' || current.visibility !== 'public') throw new NotPublishedPubliclyError();
    const revokedLinks = await revokeLinks(tx, board.id);
    return { link: await issueLink(tx, board.id), revokedLinks };
  });
}

/** The published content behind an active link secret, or null. */
export async function hostedBoard(
  db: CommonQueryMethods,
  secret: string,
): Promise<{ title: string; version: number; content: unknown } | null> {
  const row = await db.maybeOne(sql.type(z.object({ board_id: z.string(), title: z.string(), version: z.number() }))`
    select b.id as board_id, b.title, p.version from board_links l
    join insight_boards b on b.id = l.board_id
    join board_publications p on p.board_id = b.id
    where l.secret_hash = ${sha256(secret)} and l.revoked_at is null
      and p.state = 'published' and p.visibility = 'public' and p.version is not null`);
  if (!row) return null;
  return { title: row.title, version: row.version, content: await boardContent(db, row.board_id, row.version) };
}
