/**
 * The daemons of one space, as `up`, `space add` and `space restore` start them.
 *
 * @module
 */
import { deliveryComponent, signerComponent, superviseComponent } from "./daemons.ts";
import type { ComponentSpec, MeshRecord } from "./stack.ts";
import { authServiceComponent, readUserAuth } from "./user_auth.ts";

/**
 * The daemons of one space, in start order: delivery, the signer (before the supervisor, which
 * signs every credential through it), the supervisor, and the auth service when the root has
 * user auth. `up` and `space add`/`restore` start exactly these.
 */
export async function spaceDaemons(
  root: string,
  space: string,
  rec: MeshRecord,
): Promise<ComponentSpec[]> {
  const userAuth = await readUserAuth(root);
  return [
    await deliveryComponent(root, space, rec),
    await signerComponent(root, space, rec),
    await superviseComponent(root, space, rec, rec.isolation),
    ...(userAuth ? [authServiceComponent(root, space, rec, userAuth)] : []),
  ];
}
