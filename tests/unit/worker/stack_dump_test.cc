// StackDumps takes a real stopped process's backtrace with the debugger
// the machine has (eu-stack, installed by deploy/install-deps.sh, or gdb) without
// resuming it, and bounds a debugger that does not finish.
#include "worker/stack_dump.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"

namespace strata::worker {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

char State(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(in, s);
  const size_t p = s.rfind(')');
  return p == std::string::npos || p + 2 >= s.size() ? '?' : s[p + 2];
}

TEST(CompactBacktrace, GdbAndEuStackFrames) {
  const std::string gdb =
      "0x00007f in ?? ()\n"
      "#0  0x00007f1234 in __futex_wait (private=0, expected=(int *) 0x1) at "
      "futex.c:57\n"
      "#1  strata::comm::Wait (this=0x5) at comm/tcp.cc:88\n"
      "[Inferior 1 (process 7) detached]\n";
  EXPECT_EQ(CompactBacktrace(gdb),
            "#0 __futex_wait at futex.c:57 | #1 strata::comm::Wait at "
            "comm/tcp.cc:88");
  EXPECT_EQ(CompactBacktrace("PID 7 - process\nTID 7:\n#0  0x00007f12 "
                             "nanosleep\n#1  0x0000555 main\n"),
            "#0 nanosleep | #1 main");
  EXPECT_EQ(CompactBacktrace("TID 7:\n#0  0x000055 strata::Step(bool*)\n"
                             "    /src/trainer.cc:285:40\n#1  0x000056 main\n"
                             "TID 8:\n"),
            "#0 strata::Step at /src/trainer.cc:285:40 | #1 main");
  EXPECT_EQ(CompactBacktrace(std::string(100, 'x')), "");
  const std::string many = [] {
    std::string s;
    for (int i = 0; i < 500; ++i) s += "#" + std::to_string(i) + " f ()\n";
    return s;
  }();
  EXPECT_LE(CompactBacktrace(many, 100).size(), 103u);
}

TEST(CompactPyStack, MainThreadFramesOnly) {
  const std::string spy =
      "Process 7: python3 train.py\n"
      "Python v3.11.2 (/usr/bin/python3.11)\n\n"
      "Thread 7 (idle): \"MainThread\"\n"
      "    wait (threading.py:320)\n"
      "    train_step (train.py:40)\n"
      "    <module> (train.py:77)\n"
      "Thread 9 (idle): \"Thread-1\"\n"
      "    run (threading.py:10)\n";
  EXPECT_EQ(CompactPyStack(spy),
            "wait (threading.py:320) | train_step (train.py:40) | <module> "
            "(train.py:77)");
  EXPECT_EQ(CompactPyStack("Error: Failed to find python version\n"), "");
  EXPECT_LE(CompactPyStack(spy, 10).size(), 13u);
}

// A Python process's dump carries its Python stack when py-spy is on its
// PATH (the venv of deploy/python-venv.sh in the build tree).
TEST(StackDumps, PythonProcessGetsItsPythonStack) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  const std::string venv = std::string(bin ? bin : "build") + "/venv/bin";
  if (access((venv + "/py-spy").c_str(), X_OK) != 0 ||
      access((venv + "/python").c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no venv with py-spy at " << venv;
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("PATH", (venv + ":/usr/bin:/bin").c_str(), 1);
    const std::string py = venv + "/python";
    execl(py.c_str(), "python", "-c",
          "import time\ndef hung_here():\n    time.sleep(30)\nhung_here()\n",
          nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  StackDumps dumps(20000);
  auto now = NowMs();
  auto at_once = dumps.Start(3, child, now);
  std::map<int, std::string> done;
  const int64_t deadline = now + 30000;
  while (!at_once.has_value() && done.empty() && NowMs() < deadline) {
    done = dumps.Poll(NowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (at_once.has_value()) GTEST_SKIP() << "no gdb or eu-stack";
  ASSERT_EQ(done.size(), 1u);
  EXPECT_NE(done[3].find(" || python: hung_here (<string>:3) | <module> "
                         "(<string>:4)"),
            std::string::npos)
      << done[3];
}

TEST(CompactFaultHandlerStack, CurrentThreadFramesOnly) {
  const std::string raw =
      "Thread 0x00007f41199566c0 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 982 in run\n"
      "\n"
      "Current thread 0x00007f4127dbeb80 (most recent call first):\n"
      "  File \"/x/train.py\", line 40 in train_step\n"
      "  File \"<string>\", line 6 in <module>\n";
  EXPECT_EQ(CompactFaultHandlerStack(raw),
            "train_step (train.py:40) | <module> (<string>:6)");
  EXPECT_EQ(CompactFaultHandlerStack(raw.substr(0, raw.find("\n\n"))),
            "run (threading.py:982)");
  EXPECT_EQ(CompactFaultHandlerStack(""), "");
  EXPECT_EQ(CompactFaultHandlerStack("garbage\n  File \"x\n"), "");
}

// Without py-spy, a rank that imported the strata package under a worker
// (STRATA_PLAN set) gives its Python stack through faulthandler: the
// worker signals it and reads pystack-<pid> next to the plan.
TEST(StackDumps, FaultHandlerStackWithoutPySpy) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  const char* src = std::getenv("STRATA_SOURCE_DIR");
  if (bin == nullptr || src == nullptr) GTEST_SKIP() << "not under ctest";
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no python3";
  if (access("/usr/bin/py-spy", X_OK) == 0 || access("/bin/py-spy", X_OK) == 0) {
    GTEST_SKIP() << "py-spy is on the system PATH";
  }
  char tmpl[] = "/tmp/strata-fh-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  setenv("PATH", "/usr/bin:/bin", 1);  // the worker's: no py-spy either
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("STRATA_PLAN", (dir + "/plan.json").c_str(), 1);
    setenv("PYTHONPATH", (std::string(src) + "/python").c_str(), 1);
    setenv("STRATA_LIB", (std::string(bin) + "/runtime/libstrata.so").c_str(), 1);
    execl("/usr/bin/python3", "python3", "-c",
          "import strata, time\ndef hung_here():\n    while True: "
          "time.sleep(0.05)\nhung_here()\n",
          nullptr);
    _exit(127);
  }
  const std::string file = dir + "/pystack-" + std::to_string(child);
  for (int i = 0; i < 200 && access(file.c_str(), F_OK) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // <= 10 s
  }
  const bool registered = access(file.c_str(), F_OK) == 0;
  StackDumps dumps(20000);
  auto now = NowMs();
  std::optional<std::string> at_once;
  std::map<int, std::string> done;
  if (registered) at_once = dumps.Start(4, child, now);
  const int64_t deadline = now + 30000;
  while (registered && !at_once.has_value() && done.empty() &&
         NowMs() < deadline) {
    done = dumps.Poll(NowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool alive = waitpid(child, nullptr, WNOHANG) == 0;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  setenv("PATH", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(registered) << "the rank made no " << file;
  if (at_once.has_value()) GTEST_SKIP() << "no gdb or eu-stack";
  EXPECT_TRUE(alive) << "the signal killed the rank";
  ASSERT_EQ(done.size(), 1u);
  EXPECT_NE(done[4].find(" || python: hung_here (<string>:3) | <module> "
                         "(<string>:4)"),
            std::string::npos)
      << done[4];
}

// A rank that exits removes its faulthandler file first: the worker never
// signals a process whose handler Python has already dropped.
TEST(StackDumps, FaultHandlerFileGoesAtExit) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  const char* src = std::getenv("STRATA_SOURCE_DIR");
  if (bin == nullptr || src == nullptr) GTEST_SKIP() << "not under ctest";
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no python3";
  char tmpl[] = "/tmp/strata-fh-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("STRATA_PLAN", (dir + "/plan.json").c_str(), 1);
    setenv("PYTHONPATH", (std::string(src) + "/python").c_str(), 1);
    setenv("STRATA_LIB", (std::string(bin) + "/runtime/libstrata.so").c_str(), 1);
    execl("/usr/bin/python3", "python3", "-c",
          "import os, strata\n"
          "assert os.path.exists(os.environ['STRATA_PLAN'][:-9] + "
          "'pystack-%d' % os.getpid())\n",
          nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const bool left = std::filesystem::exists(dir + "/pystack-" + std::to_string(child));
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(left);
}

TEST(StackDumps, StoppedProcessStaysStopped) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execlp("sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  while (State(child) != 'T') std::this_thread::yield();

  StackDumps dumps(20000);
  auto now = NowMs();
  auto at_once = dumps.Start(7, child, now);
  if (at_once.has_value()) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    GTEST_SKIP() << "no gdb or eu-stack: '" << *at_once << "'";
  }
  std::map<int, std::string> done;
  const int64_t deadline = now + 30000;
  while (done.empty() && NowMs() < deadline) {
    done = dumps.Poll(NowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[7].starts_with("stack: #0 ")) << done[7];
  EXPECT_NE(done[7].find("sleep"), std::string::npos) << done[7];
  EXPECT_EQ(State(child), 'T');  // the debugger left it stopped
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(StackDumps, DebuggerPastItsBudgetIsKilled) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execlp("sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  StackDumps dumps(0);  // every dump is already late at its first poll
  auto at_once = dumps.Start(1, child, NowMs());
  std::map<int, std::string> done;
  if (!at_once.has_value()) done = dumps.Poll(NowMs() + 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (at_once.has_value()) GTEST_SKIP() << "no gdb or eu-stack";
  ASSERT_EQ(done.size(), 1u);
  EXPECT_NE(done[1].find("no backtrace within 0 ms"), std::string::npos)
      << done[1];
  EXPECT_TRUE(dumps.empty());
}

}  // namespace
}  // namespace strata::worker
