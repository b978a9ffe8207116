package main

// The operator's image holds the binary only: spec.backup.timeZone is resolved (by the manager and
// its admission webhook) from the time zone database embedded here.
import _ "time/tzdata"
