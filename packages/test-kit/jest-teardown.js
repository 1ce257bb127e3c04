'use strict';
// jest's root globalTeardown: see containers.js.
module.exports = () => require('./containers').teardown();
