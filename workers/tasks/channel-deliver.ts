// channel.deliver: sends one reply to a channel (core/channels/send-reply.ts).
// Replies of one channel share a queue, so they arrive in order.
import { DELIVER_JOB } from '../../core/channels/linking.ts';
import { DeliverInput, deliverReply } from '../../core/channels/send-reply.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { defineTask } from '../define-task.ts';

export default defineTask(DELIVER_JOB, DeliverInput, async (input, ctx) =>
  deliverReply(input, { ...ctx, keyring: Keyring.fromConfig(ctx.config) }),
);
