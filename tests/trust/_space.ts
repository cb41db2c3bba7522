/**
 * Creates a space's streams, buckets and one agent's bind-only durables through a
 * provisioner credential (so the setup itself exercises the provisioner's grants).
 */
import { AckPolicy } from "nats";
import { mintCreds, newIdentity, type SpaceAuth, token } from "../../lib/trust/mod.ts";
import { connectCreds } from "./_helpers.ts";
import { setupSpaceStreamsOn } from "../../lib/wire/streams.ts";

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
    // The space's canonical streams and buckets, exactly as `cotal up` makes them.
    await setupSpaceStreamsOn(nc, auth.space);
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
