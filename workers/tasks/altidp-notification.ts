// auth.altidp-notification: applies one stored altidp notification (see
// core/external-login/altidp-notifications.ts). Added by the notification
// route as a job of the platform (enqueueSystemJob); no tenant, no platform job: the
// notification row itself records the outcome, and applying twice is a no-op.
import { z } from 'zod';
import { ALTIDP_NOTIFICATION_JOB, applyNotification } from '../../core/external-login/altidp-notifications.ts';
import type { TaskDefinition } from '../define-task.ts';

const Payload = z.object({ notificationId: z.uuid() });

const altidpNotification: TaskDefinition = {
  kind: ALTIDP_NOTIFICATION_JOB,
  build: (deps) => async (payload) => {
    const parsed = Payload.safeParse(payload);
    if (!parsed.success) {
      deps.logger.error(
        { kind: ALTIDP_NOTIFICATION_JOB },
        'altidp notification job without a notification id; dropped',
      );
      return;
    }
    const applied = await applyNotification(deps.db, parsed.data.notificationId);
    deps.logger.info(
      {
        kind: ALTIDP_NOTIFICATION_JOB,
        notificationId: parsed.data.notificationId,
        outcome: applied?.outcome ?? 'already_applied',
      },
      'altidp notification applied',
    );
  },
};

export default altidpNotification;
