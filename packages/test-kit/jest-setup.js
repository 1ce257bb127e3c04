'use strict';
// jest's root globalSetup: see containers.js.
module.exports = () => require('./containers').setup();
