// Command runtask runs the demo goal on a droidmesh gateway over its HTTP/JSON face and follows
// the task's Server-Sent Events to the end. Standard library only: no code generation.
//
// Usage: go run . [HOST:PORT]   (else $DROIDMESH_GATEWAY_HTTP, else 127.0.0.1:50049)
// $DROIDMESH_DEVICE, if set, is the serial of the phone to use (else any free one).
// Exits 0 when the task succeeded, 1 when it failed, 2 when a request failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const goal = "Open Settings and turn on Wi-Fi"

// event is the part of a TaskEvent (proto3 JSON: 64-bit integers are strings) this reads.
type event struct {
	Seq       string `json:"seq"`
	Completed *struct {
		Success bool   `json:"success"`
		Answer  string `json:"answer"`
		Error   string `json:"error"`
	} `json:"completed"`
}

func main() {
	base := os.Getenv("DROIDMESH_GATEWAY_HTTP")
	if len(os.Args) > 1 {
		base = os.Args[1]
	}
	if base == "" {
		base = "127.0.0.1:50049"
	}
	os.Exit(run("http://" + base))
}

func run(base string) int {
	client := &http.Client{Timeout: 300 * time.Second} // bounds the whole event stream too
	body, _ := json.Marshal(map[string]string{"goal": goal, "device": os.Getenv("DROIDMESH_DEVICE")})
	resp, err := client.Post(base+"/v1/tasks", "application/json", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: POST /v1/tasks: %v\n", err)
		return 2
	}
	var submitted struct {
		TaskID string `json:"taskId"`
	}
	err = json.NewDecoder(resp.Body).Decode(&submitted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil {
		fmt.Fprintf(os.Stderr, "error: POST /v1/tasks: %s (%v)\n", resp.Status, err)
		return 2
	}
	fmt.Printf("task %s\n", submitted.TaskID)

	req, _ := http.NewRequest(http.MethodGet, base+"/v1/tasks/"+submitted.TaskID+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err = client.Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: GET events: %v\n", err)
		return 2
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Fprintf(os.Stderr, "error: GET events: %s %s\n", resp.Status, msg)
		return 2
	}

	// Each event: "id: N", "event: kind", "data: {...}", then a blank line; ":" lines are
	// keep-alives.
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64*1024), 8*1024*1024) // an event with a screenshot is large
	var name, data string
	var last event
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[len("data:"):], " ")
		case line == "" && data != "":
			if name == "error" { // the stream failed: {"code": ..., "message": ...}
				fmt.Fprintf(os.Stderr, "error: the event stream failed: %s\n", data)
				return 2
			}
			var ev event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				fmt.Fprintf(os.Stderr, "error: event %q: %v\n", data, err)
				return 2
			}
			fmt.Printf("%s %s\n", ev.Seq, name)
			last = ev
			name, data = "", ""
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "error: reading events: %v\n", err)
		return 2
	}
	if last.Completed == nil {
		fmt.Fprintln(os.Stderr, "error: the event stream ended before the task completed")
		return 2
	}
	if !last.Completed.Success {
		reason := last.Completed.Error
		if reason == "" {
			reason = last.Completed.Answer
		}
		fmt.Fprintf(os.Stderr, "failed: %s\n", reason)
		return 1
	}
	fmt.Printf("answer: %s\n", last.Completed.Answer)
	return 0
}
