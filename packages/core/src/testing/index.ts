/** Test doubles other packages' tests share (`@fastkernels/core/testing`; not part of the runtime API). */
export { FakePeer } from './fake-peer.js';
