// Package relay carries a client's connection between nodes (SPEC 15: other nodes relay a
// session's frames through the store's pub/sub). A node that gets a hello for a session another
// live node holds becomes the connection's edge (Edge): it forwards the connection's messages,
// hello first, to the holder's inbox (cluster.Directory), and writes what the holder sends back.
// On the holder the connection is a remote: a Transport whose frames go to the edge's inbox, and
// a Conn of the node fed by the forwarded messages — the session cannot tell it from a local
// connection. Every message of a link is numbered, and the nodes ping each other's links
// (check.go), so a message the store lost breaks the link: the client resumes.
package relay
