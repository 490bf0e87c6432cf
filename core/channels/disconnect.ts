// Disconnect: the credentials, the binding and the inbound URL are gone at
// once (inbound requests are refused from this commit on); undoing the
// registration at the channel (Telegram deleteWebhook, Slack auth.revoke)
// is a channel.disconnect job, which gets the credentials it needs sealed
// into its own input, bound to its job id.
import { timeOrderedId } from '../ids.ts';
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type DatabasePool } from '../db/pool.ts';
import { enqueueJob } from '../jobs/enqueue.ts';
import { channelQueue, DISCONNECT_JOB } from './linking.ts';
import { linkRow, openSettings } from './store.ts';
import type { ChannelSettings } from './types.ts';

const teardownAad = (jobId: string) => `channel-teardown:${jobId}`;

export const DisconnectInput = z.object({
  channel: z.string(),
  keyId: z.string().nullable(),
  sealed: z.string().nullable(),
});

export async function disconnectChannel(
  db: DatabasePool,
  keyring: Keyring,
  tenantId: string,
  channel: string,
): Promise<{ jobId: string }> {
  return db.transaction(async (tx) => {
    const row = await tx.maybeOne(
      linkRow`select * from channel_links where tenant_id = ${tenantId} and channel = ${channel} for update`,
    );
    const jobId = timeOrderedId();
    const settings = row ? openSettings(keyring, row) : null;
    const registered = !!row && (row.bound_ref !== null || row.link_awaiting || row.state === 'linking');
    const sealed = settings && registered ? keyring.seal(JSON.stringify(settings), teardownAad(jobId)) : null;
    if (row) {
      // A pending link ends here; its steps find no row with their job id.
      if (row.link_job_id) {
        await tx.query(sql.unsafe`
          update jobs set status = 'cancelled', finished_at = now() where id = ${row.link_job_id} and status = 'queued'`);
      }
      await tx.query(sql.unsafe`
        update channel_links set state = 'not_linked', inbound_id = null, config = '{}'::jsonb, secrets = '{}'::jsonb,
          link_code_hash = null, link_expires_at = null, link_job_id = null, link_awaiting = false, link_prev_state = null,
          bound_ref = null, account = null, session_id = null, linked_at = null, last_error = null, last_error_at = null, updated_at = now()
        where id = ${row.id}`);
    }
    await enqueueJob(tx, {
      id: jobId,
      kind: DISCONNECT_JOB,
      tenantId,
      queueName: channelQueue(tenantId, channel),
      maxAttempts: 6,
      input: { channel, keyId: sealed?.keyId ?? null, sealed: sealed?.ciphertext ?? null },
    });
    return { jobId };
  });
}

export function openTeardown(
  keyring: Keyring,
  jobId: string,
  input: z.infer<typeof DisconnectInput>,
): ChannelSettings | null {
  if (!input.sealed || !input.keyId) return null;
  return JSON.parse(keyring.open(input.keyId, input.sealed, teardownAad(jobId))) as ChannelSettings;
}
