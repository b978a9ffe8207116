package membership

// Quorum returns the number of voting members a cluster of voters needs to commit: a majority,
// voters/2+1, per raft. Learners do not vote and are not counted.
func Quorum(voters int) int { return voters/2 + 1 }
