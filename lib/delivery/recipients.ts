/**
 * `recipientKnown {to | role}`: whether a DM to a principal or a task to a role would be kept.
 * DM and TASK keep only what a durable waits for (docs/SPEC.md §4): the broker acknowledges a
 * DM to a principal with no live lifecycle, or a task to a role no agent was ever given, and
 * keeps nothing. An agent cannot read the ACL rows or list the durables that say so; the
 * daemon, which mirrors the rows, answers this one question (yes or no, nothing of the rows).
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { isNotFound, parsePrincipalId, svcDurableName } from "../wire/mod.ts";
import { aliasAclRows, type DeliveryContext } from "./context.ts";

function bad(message: string): never {
  throw new CotalError("bad_request", message);
}

/** Answers whether `body.to` has a live lifecycle, or `body.role` a task durable. */
export async function recipientKnown(
  ctx: DeliveryContext,
  body: Record<string, unknown>,
): Promise<{ known: boolean }> {
  const { to, role } = body;
  if ((to === undefined) === (role === undefined)) {
    bad("recipientKnown takes exactly one of to (owner.actor) or role.");
  }
  if (to !== undefined) {
    if (typeof to !== "string") bad("recipientKnown's to must be a string owner.actor.");
    let id: string;
    try {
      const p = parsePrincipalId(to, { anyOwner: true });
      id = `${p.owner}.${p.actor}`;
    } catch {
      bad(`recipientKnown's to is not a principal (owner.actor).`);
    }
    return { known: aliasAclRows(ctx, id).length > 0 };
  }
  if (typeof role !== "string") bad("recipientKnown's role must be a string.");
  let durable: string;
  try {
    durable = svcDurableName(role);
  } catch {
    bad("recipientKnown's role is not a valid role name.");
  }
  try {
    await ctx.jsm.consumers.info(ctx.streams.task, durable);
    return { known: true };
  } catch (err) {
    if (isNotFound(err)) return { known: false };
    throw err;
  }
}
