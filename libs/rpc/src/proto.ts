/** Every generated message, enum and service of `ironflow.v1`, re-exported as `v1` from `@ironflow/rpc`. */
export * from '@ironflow/contracts/proto';
