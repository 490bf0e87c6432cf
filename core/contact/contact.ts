// Contact form submissions: anyone may send one (rate-limited); the platform
// operator lists, updates and deletes them.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { decodeCursor, pageOf } from '../paging.ts';

export const CONTACT_STATUSES = ['new', 'in_progress', 'resolved', 'spam'] as const;

export const ContactRow = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string(),
  subject: z.string().nullable(),
  message: z.string(),
  status: z.enum(CONTACT_STATUSES),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ContactRow = z.infer<typeof ContactRow>;
const contactRow = sql.type(ContactRow);
const columns = sql.fragment`id, name, email, subject, message, status, created_at, updated_at`;

export async function submitContact(
  db: CommonQueryMethods,
  input: { name: string; email: string; subject?: string | undefined; message: string; ip: string },
) {
  return db.one(contactRow`
    insert into contact_submissions (name, email, subject, message, source_ip)
    values (${input.name}, ${input.email}, ${input.subject ?? null}, ${input.message}, ${input.ip})
    returning ${columns}`);
}

const ContactPageRow = ContactRow.extend({ cursor_t: z.string() });

export async function listContacts(
  db: CommonQueryMethods,
  options: { limit: number; cursor?: string | undefined; status?: (typeof CONTACT_STATUSES)[number] | undefined },
) {
  const after = options.cursor ? decodeCursor(options.cursor) : null;
  const rows = await db.any(sql.type(ContactPageRow)`
    select ${columns}, created_at::text as cursor_t from contact_submissions
    where true
      ${options.status ? sql.fragment`and status = ${options.status}` : sql.fragment``}
      ${after ? sql.fragment`and (created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)` : sql.fragment``}
    order by created_at desc, id desc
    limit ${options.limit + 1}`);
  return pageOf(rows, options.limit);
}

export async function setContactStatus(db: CommonQueryMethods, id: string, status: (typeof CONTACT_STATUSES)[number]) {
  return db.maybeOne(contactRow`
    update contact_submissions set status = ${status}, updated_at = now() where id = ${id} returning ${columns}`);
}

export async function deleteContact(db: CommonQueryMethods, id: string): Promise<boolean> {
  return (await db.query(sql.unsafe`delete from contact_submissions where id = ${id}`)).rowCount === 1;
}
