/**
 * Creates a space's streams, buckets and one agent's bind-only durables through a
 * provisioner credential (so the setup itself exercises the provisioner's grants).
 */
import { AckPolicy, RetentionPolicy } from "nats";
import { mintCreds, newIdentity, type SpaceAuth, token } from "../../lib/trust/mod.ts";
import { connectCreds } from "./_helpers.ts";

/** The names a test needs for a space. */
export function names(space: string) {
  const s = token(space);
  return {
    s,
    P: `cotal.${s}`,
    CHAT: `CHAT_${s}`,
    DM: `DM_${s}`,
    TASK: `TASK_${s}`,
    INBOX: `INBOX_${s}`,
    DLV: `DLV_${s}`,
    presence: `cotal_presence_${s}`,
    channels: `cotal_channels_${s}`,
    members: `cotal_members_${s}`,
    acl: `cotal_acl_${s}`,
    membership: `cotal_membership_${s}`,
    delivery: `cotal_delivery_${s}`,
    manager: `cotal_manager_${s}`,
  };
}

/** Bind-only durables for one lifecycle (what provisionAgentDurables will do). */
export interface AgentDurables {
  owner: string;
  actor: string;
  uid: string;
  role?: string;
}

/** Creates every stream and bucket, then each agent's DM/DLV durables and role queues. */
export async function provisionSpace(
  url: string,
  auth: SpaceAuth,
  agents: AgentDurables[] = [],
): Promise<void> {
  const n = names(auth.space);
  const nc = await connectCreds(url, await mintCreds(auth, newIdentity(), "provisioner"));
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({
      name: n.CHAT,
      subjects: [`${n.P}.chat.>`],
      max_msgs_per_subject: 1000,
    });
    await jsm.streams.add({ name: n.DM, subjects: [`${n.P}.inst.>`] });
    await jsm.streams.add({
      name: n.TASK,
      subjects: [`${n.P}.svc.>`],
      retention: RetentionPolicy.Workqueue,
    });
    await jsm.streams.add({ name: n.INBOX, subjects: [`${n.P}.dinbox.>`] });
    await jsm.streams.add({ name: n.DLV, subjects: [`${n.P}.dlv.>`] });
    const js = nc.jetstream();
    await js.views.kv(n.presence, { ttl: 6000 });
    await js.views.kv(n.channels, { history: 1 });
    await js.views.kv(n.members);
    await js.views.kv(n.acl);
    await js.views.kv(n.membership, { history: 1 });
    await js.views.kv(n.delivery, { ttl: 30_000 });
    await js.views.kv(n.manager, { ttl: 10_000 });
    for (const a of agents) {
      const key = `${a.owner}-${a.actor}-${a.uid}`;
      await jsm.consumers.add(n.DM, {
        durable_name: `dm_${key}`,
        filter_subject: `${n.P}.inst.${a.owner}.${a.actor}.>`,
        ack_policy: AckPolicy.Explicit,
      });
      await jsm.consumers.add(n.DLV, {
        durable_name: `dlv_${key}`,
        filter_subject: `${n.P}.dlv.${a.owner}.${a.actor}.${a.uid}`,
        ack_policy: AckPolicy.Explicit,
      });
      if (a.role) {
        await jsm.consumers.add(n.TASK, {
          durable_name: `svc_${a.role}`,
          filter_subject: `${n.P}.svc.${a.role}.>`,
          ack_policy: AckPolicy.Explicit,
        });
      }
    }
  } finally {
    await nc.close();
  }
}
