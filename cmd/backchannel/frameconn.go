package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/coder/websocket"

	"github.com/backchannel-io/backchannel/frames"
)

// frameConn is a client connection to the broker's WebSocket endpoint /v1/ws for the commands
// that speak frames themselves: call's text agent, demo's caller, and bench's hosts and agents
// (the Go SDK serves hosts only). One goroutine reads: text messages (frames) are queued for
// next, binary messages (the agent's audio, to a caller) are reported to onAudio. send may be
// called from any goroutine. close ends the connection and waits for the reader.
type frameConn struct {
	ws       *websocket.Conn
	frames   chan []byte   // text messages, in order
	closing  chan struct{} // closed by close: the reader stops queueing
	readDone chan struct{} // closed when the reader has returned
	readErr  error         // why the reader stopped; set before readDone is closed
	once     sync.Once
}

// dialFrames connects to url (ws://HOST:PORT/v1/ws). onAudio, when not nil, is called from the
// reader for each binary message.
func dialFrames(ctx context.Context, url string, onAudio func()) (*frameConn, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	c := &frameConn{ws: ws, frames: make(chan []byte, 64), closing: make(chan struct{}), readDone: make(chan struct{})}
	go c.read(onAudio)
	return c, nil
}

// read queues every text message until the connection ends or close is called.
func (c *frameConn) read(onAudio func()) {
	defer close(c.readDone)
	for {
		typ, b, err := c.ws.Read(context.Background())
		if err != nil {
			c.readErr = err
			return
		}
		if typ == websocket.MessageBinary {
			if onAudio != nil {
				onAudio()
			}
			continue
		}
		select {
		case c.frames <- b:
		case <-c.closing:
			c.readErr = errors.New("connection closed")
			return
		}
	}
}

// send writes v as one text message: a frames.Frame as frames.Encode renders it, anything else
// as JSON.
func (c *frameConn) send(ctx context.Context, v any) error {
	var b []byte
	var err error
	if f, ok := v.(frames.Frame); ok {
		b, err = frames.Encode(f)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// next returns the next text message. Once the connection has ended and every message before
// the end was taken, it returns why the connection ended.
func (c *frameConn) next(ctx context.Context) ([]byte, error) {
	select {
	case b := <-c.frames:
		return b, nil
	case <-c.readDone:
		select {
		case b := <-c.frames:
			return b, nil
		default:
			return nil, c.readErr
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// expectType returns the next frame of type typ as a generic JSON object, skipping frames of
// other types; an error frame fails it.
func (c *frameConn) expectType(ctx context.Context, typ string) (map[string]any, error) {
	for {
		b, err := c.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", typ, err)
		}
		var f map[string]any
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f["type"] {
		case typ:
			return f, nil
		case "error":
			return nil, fmt.Errorf("waiting for %s: error frame %s", typ, b)
		}
	}
}

// close closes the connection (status 1000) and waits for the reader to return.
func (c *frameConn) close() {
	c.once.Do(func() { close(c.closing) })
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.readDone
}
