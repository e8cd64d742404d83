export default defineEffect({ description: 'The Rust effect `plain`.', handler: 'nope' });
